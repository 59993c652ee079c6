/** Placeholder: replaced by the screen's implementation. */
export function FlowEditorPage() {
  return (
    <section>
      <h1>Flow editor</h1>
    </section>
  )
}
