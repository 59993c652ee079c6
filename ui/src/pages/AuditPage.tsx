/** Placeholder: replaced by the screen's implementation. */
export function AuditPage() {
  return (
    <section>
      <h1>Audit log</h1>
    </section>
  )
}
