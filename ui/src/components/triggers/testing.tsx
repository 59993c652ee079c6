/** Test helpers of the triggers' components: a router and a query client around a component. */
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { RouterProvider, createMemoryHistory, createRootRoute, createRoute, createRouter } from '@tanstack/react-router'
import { render } from '@testing-library/react'
import type { ReactNode } from 'react'

/** Render `node` at `/`, in a router whose other pages say where they are (`page <path>`). */
export function renderRouted(node: ReactNode) {
  const rootRoute = createRootRoute()
  const home = createRoute({ getParentRoute: () => rootRoute, path: '/', component: () => <>{node}</> })
  const other = createRoute({
    getParentRoute: () => rootRoute,
    path: '$',
    component: () => <p>page {window.location.pathname}</p>,
  })
  const router = createRouter({
    routeTree: rootRoute.addChildren([home, other]),
    history: createMemoryHistory({ initialEntries: ['/'] }),
  })
  const client = new QueryClient({ defaultOptions: { queries: { retry: false }, mutations: { retry: false } } })
  render(
    <QueryClientProvider client={client}>
      <RouterProvider router={router} />
    </QueryClientProvider>,
  )
  return { router, client }
}
