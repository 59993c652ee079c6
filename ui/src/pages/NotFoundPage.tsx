import { Link } from '@tanstack/react-router'

export function NotFoundPage() {
  return (
    <section>
      <h1>Not found</h1>
      <p>
        There is no page here. <Link to="/runs">Go to the runs.</Link>
      </p>
    </section>
  )
}
