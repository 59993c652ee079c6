/** Small line icons of the waits (inline SVG: no font or file needed), decorative only. */
export type WaitIcon = 'clock' | 'bell' | 'calendar'

const PATHS: Record<WaitIcon, string> = {
  clock: 'M8 1.5a6.5 6.5 0 1 0 0 13a6.5 6.5 0 1 0 0-13zM8 4v4.2l2.8 1.7',
  bell: 'M4 11V7a4 4 0 0 1 8 0v4l1.2 1.5H2.8zM6.5 13.5a1.6 1.6 0 0 0 3 0',
  calendar: 'M2.5 3.5h11v10h-11zM2.5 6.5h11M5.5 2v3M10.5 2v3',
}

export function Icon({ name }: { name: WaitIcon }) {
  return (
    <svg
      className={`icon icon-${name}`}
      width="12"
      height="12"
      viewBox="0 0 16 16"
      fill="none"
      stroke="currentColor"
      strokeWidth="1.6"
      strokeLinecap="round"
      strokeLinejoin="round"
      aria-hidden="true"
      focusable="false"
    >
      <path d={PATHS[name]} />
    </svg>
  )
}
