/** A cron expression in words, for the usual shapes (null: say the expression itself). */

const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday']
const ALIASES: Record<string, string> = {
  '@yearly': 'every year on January 1 at 00:00',
  '@annually': 'every year on January 1 at 00:00',
  '@monthly': 'on the 1st of every month at 00:00',
  '@weekly': 'every Sunday at 00:00',
  '@daily': 'every day at 00:00',
  '@midnight': 'every day at 00:00',
  '@hourly': 'every hour, on the hour',
}

const NUMBER = /^\d+$/
const STEP = /^\*\/(\d+)$/

function two(n: string): string {
  return n.padStart(2, '0')
}

function ordinal(n: number): string {
  const tens = n % 100
  if (tens >= 11 && tens <= 13) return `${n}th`
  return `${n}${['th', 'st', 'nd', 'rd'][n % 10] ?? 'th'}`
}

function days(field: string): string | null {
  if (field === '1-5') return 'every weekday (Monday to Friday)'
  const parts = field.split(',')
  if (!parts.every((p) => NUMBER.test(p) && Number(p) <= 7)) return null
  return `every ${parts.map((p) => DAYS[Number(p) % 7]).join(', ')}`
}

/**
 * `0 9 * * 1-5` → `every weekday (Monday to Friday) at 09:00`; 6 fields have the seconds
 * first (`*\/10 * * * * *` → `every 10 seconds`); aliases (`@daily`). Null for other shapes.
 */
export function cronInWords(cron: string): string | null {
  const text = cron.trim()
  if (text.startsWith('@')) return ALIASES[text.toLowerCase()] ?? null
  const fields = text.split(/\s+/)
  if (fields.length !== 5 && fields.length !== 6) return null
  const [sec, min, hour, dom, month, dow] = fields.length === 6 ? fields : ['0', ...fields]
  const anyDay = dom === '*' && month === '*'
  if (sec !== '0') {
    if (min !== '*' || hour !== '*' || !anyDay || dow !== '*') return null
    if (sec === '*') return 'every second'
    const step = STEP.exec(sec!)
    return step ? `every ${step[1]} seconds` : null
  }
  if (hour === '*' && anyDay && dow === '*') {
    if (min === '*') return 'every minute'
    const step = STEP.exec(min!)
    if (step) return `every ${step[1]} minutes`
    if (NUMBER.test(min!)) return min === '0' ? 'every hour, on the hour' : `every hour at minute ${Number(min)}`
    return null
  }
  if (!NUMBER.test(min!) || !NUMBER.test(hour!)) return null
  const at = `at ${two(hour!)}:${two(min!)}`
  if (anyDay && dow === '*') return `every day ${at}`
  if (anyDay) {
    const which = days(dow!)
    return which ? `${which} ${at}` : null
  }
  if (NUMBER.test(dom!) && month === '*' && dow === '*') return `on the ${ordinal(Number(dom))} of every month ${at}`
  return null
}
