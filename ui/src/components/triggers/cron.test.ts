import { describe, expect, it } from 'vitest'
import { cronInWords } from './cron'

describe('cronInWords', () => {
  it.each([
    ['0 9 * * *', 'every day at 09:00'],
    ['30 2 * * 1-5', 'every weekday (Monday to Friday) at 02:30'],
    ['0 18 * * 0,6', 'every Sunday, Saturday at 18:00'],
    ['15 6 1 * *', 'on the 1st of every month at 06:15'],
    ['0 0 22 * *', 'on the 22nd of every month at 00:00'],
    ['*/15 * * * *', 'every 15 minutes'],
    ['* * * * *', 'every minute'],
    ['5 * * * *', 'every hour at minute 5'],
    ['*/10 * * * * *', 'every 10 seconds'],
    ['0 30 7 * * *', 'every day at 07:30'],
    ['@daily', 'every day at 00:00'],
    ['@hourly', 'every hour, on the hour'],
  ])('says %s as "%s"', (cron, words) => {
    expect(cronInWords(cron)).toBe(words)
  })

  it('says nothing of shapes it does not know (the expression is shown instead)', () => {
    expect(cronInWords('0 9 * 1-6 MON')).toBeNull()
    expect(cronInWords('0 9-17 * * *')).toBeNull()
    expect(cronInWords('@reboot')).toBeNull()
    expect(cronInWords('0 9 *')).toBeNull()
  })
})
