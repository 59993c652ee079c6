/** Placeholder: replaced by the screen's implementation. */
export function AgentEditorPage() {
  return (
    <section>
      <h1>Agent editor</h1>
    </section>
  )
}
