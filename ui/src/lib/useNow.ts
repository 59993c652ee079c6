import { useEffect, useState } from 'react'

/** The time in seconds, ticking every second while `ticking` (for durations that still grow). */
export function useNow(ticking: boolean): number {
  const [now, setNow] = useState(() => Date.now() / 1000)
  useEffect(() => {
    if (!ticking) return
    const timer = window.setInterval(() => setNow(Date.now() / 1000), 1000)
    return () => window.clearInterval(timer)
  }, [ticking])
  return ticking ? now : Date.now() / 1000
}
