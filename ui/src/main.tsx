import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { RouterProvider } from '@tanstack/react-router'
import { StrictMode } from 'react'
import { createRoot } from 'react-dom/client'
import { ApiError } from './api/client'
import { makeRouter } from './router'
import './styles.css'

const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      // A 4xx will not get better by asking again.
      retry: (count, error) => !(error instanceof ApiError && error.status < 500) && count < 2,
      refetchOnWindowFocus: true,
    },
  },
})
const router = makeRouter(queryClient)

// A session that ended (expired, signed out elsewhere) sends the user to sign in again.
queryClient.getQueryCache().subscribe((event) => {
  const error = event.query.state.error
  if (event.type === 'updated' && error instanceof ApiError && error.status === 401) {
    queryClient.setQueryData(['auth', 'me'], null)
    if (router.state.location.pathname !== '/sign-in')
      void router.navigate({ to: '/sign-in', search: { redirect: router.state.location.href } })
  }
})

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <QueryClientProvider client={queryClient}>
      <RouterProvider router={router} />
    </QueryClientProvider>
  </StrictMode>,
)
