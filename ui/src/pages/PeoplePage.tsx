/** Placeholder: replaced by the screen's implementation. */
export function PeoplePage() {
  return (
    <section>
      <h1>People</h1>
    </section>
  )
}
