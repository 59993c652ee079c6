/** Placeholder: replaced by the screen's implementation. */
export function FoldersPage() {
  return (
    <section>
      <h1>Folders</h1>
    </section>
  )
}
