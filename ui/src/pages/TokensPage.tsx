/** Placeholder: replaced by the screen's implementation. */
export function TokensPage() {
  return (
    <section>
      <h1>Tokens</h1>
    </section>
  )
}
