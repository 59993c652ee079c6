/** An EventSource for component tests: each one made is in `made`; the test opens, fails and sends on it. */
export class FakeEventSource {
  static readonly CONNECTING = 0
  static readonly OPEN = 1
  static readonly CLOSED = 2
  static made: FakeEventSource[] = []
  readyState = FakeEventSource.CONNECTING
  onopen: ((e: Event) => void) | null = null
  onerror: ((e: Event) => void) | null = null
  onmessage: ((e: MessageEvent) => void) | null = null
  private listeners = new Map<string, Set<(e: MessageEvent) => void>>()

  constructor(readonly url: string) {
    FakeEventSource.made.push(this)
  }

  addEventListener(kind: string, listener: (e: MessageEvent) => void) {
    if (!this.listeners.has(kind)) this.listeners.set(kind, new Set())
    this.listeners.get(kind)!.add(listener)
  }

  close() {
    this.readyState = FakeEventSource.CLOSED
  }

  open() {
    this.readyState = FakeEventSource.OPEN
    this.onopen?.(new Event('open'))
  }

  fail() {
    this.readyState = FakeEventSource.CONNECTING
    this.onerror?.(new Event('error'))
  }

  /** Deliver a message of event type `kind` with `data` as its JSON. */
  send(kind: string, data: object) {
    const message = new MessageEvent(kind, { data: JSON.stringify(data) })
    for (const listener of this.listeners.get(kind) ?? []) listener(message)
  }
}
