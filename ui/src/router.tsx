/** The client routes (code-based TanStack Router); signed-out visitors go to /sign-in. */
import type { QueryClient } from '@tanstack/react-query'
import {
  createRootRouteWithContext,
  createRoute,
  createRouter,
  Outlet,
  lazyRouteComponent,
  redirect,
} from '@tanstack/react-router'
import { fetchMe, meKey } from './api/auth'
import type { RunStatus } from './api/types'
import { Layout } from './components/Layout'
import type { RunsSearch } from './lib/runFilters'
import { ApprovalsPage } from './pages/ApprovalsPage'
import { AuditPage } from './pages/AuditPage'
import { FoldersPage } from './pages/FoldersPage'
import { ItemPage } from './pages/ItemPage'
import { NotFoundPage } from './pages/NotFoundPage'
import { PeoplePage } from './pages/PeoplePage'
import { RunPage } from './pages/RunPage'
import { RunsPage } from './pages/RunsPage'
import { SignInPage } from './pages/SignInPage'
import { TokensPage } from './pages/TokensPage'
import { WorkspacePage } from './pages/WorkspacePage'

type Context = { queryClient: QueryClient }

const RUN_STATUSES: readonly RunStatus[] = ['queued', 'running', 'waiting', 'succeeded', 'failed', 'cancelled']

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined
}

const rootRoute = createRootRouteWithContext<Context>()({
  component: Layout,
  notFoundComponent: NotFoundPage,
})

/** Routes below need a signed-in user. */
const authed = createRoute({
  getParentRoute: () => rootRoute,
  id: 'authed',
  beforeLoad: async ({ context, location }) => {
    const me = await context.queryClient.ensureQueryData({ queryKey: meKey, queryFn: fetchMe })
    if (!me) throw redirect({ to: '/sign-in', search: { redirect: location.href } })
    return { me }
  },
})

export const signInRoute = createRoute({
  getParentRoute: () => rootRoute,
  path: '/sign-in',
  validateSearch: (search: Record<string, unknown>): { redirect?: string } => ({ redirect: text(search.redirect) }),
  component: SignInPage,
})

const indexRoute = createRoute({
  getParentRoute: () => authed,
  path: '/',
  beforeLoad: () => {
    throw redirect({ to: '/runs' })
  },
})

/** The runs list's filters are kept in the URL; `from` and `to` are days (`YYYY-MM-DD`, both included). */
export type { RunsSearch }

function day(value: unknown): string | undefined {
  return typeof value === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(value) ? value : undefined
}

export const runsRoute = createRoute({
  getParentRoute: () => authed,
  path: '/runs',
  validateSearch: (search: Record<string, unknown>): RunsSearch => ({
    status: RUN_STATUSES.find((s) => s === search.status),
    path: text(search.path),
    folder: text(search.folder),
    by: text(search.by),
    from: day(search.from),
    to: day(search.to),
  }),
  component: RunsPage,
})

export const runRoute = createRoute({
  getParentRoute: () => authed,
  path: '/runs/$runId',
  validateSearch: (search: Record<string, unknown>): { step?: string } => ({ step: text(search.step) }),
  component: RunPage,
})

export const approvalsRoute = createRoute({
  getParentRoute: () => authed,
  path: '/approvals',
  validateSearch: (search: Record<string, unknown>): { run?: string } => ({ run: text(search.run) }),
  component: ApprovalsPage,
})

export const workspaceRoute = createRoute({
  getParentRoute: () => authed,
  path: '/workspace',
  validateSearch: (search: Record<string, unknown>): { q?: string; prefix?: string } => ({
    q: text(search.q),
    prefix: text(search.prefix),
  }),
  component: Outlet,
})

/** `/workspace` itself: folders, items and search (an index route, so the item splat never takes it). */
const workspaceIndexRoute = createRoute({
  getParentRoute: () => workspaceRoute,
  path: '/',
  component: WorkspacePage,
})

/** `/workspace/<item path>`: one item. */
export const itemRoute = createRoute({
  getParentRoute: () => workspaceRoute,
  path: '$',
  validateSearch: (search: Record<string, unknown>): { version?: number } => {
    const n = Number(search.version)
    return { version: Number.isInteger(n) && n > 0 ? n : undefined }
  },
  component: ItemPage,
})

/** `/edit/<flow path>`: the flow editor, on the caller's draft (CodeMirror and the graph: its own chunk). */
export const flowEditorRoute = createRoute({
  getParentRoute: () => authed,
  path: '/edit/$',
  component: lazyRouteComponent(() => import('./pages/FlowEditorPage'), 'FlowEditorPage'),
})

/** `/agents/<agent path>`: the agent editor, on the caller's draft; `from` is the flow it was opened over. */
export const agentEditorRoute = createRoute({
  getParentRoute: () => authed,
  path: '/agents/$',
  validateSearch: (search: Record<string, unknown>): { from?: string } => ({ from: text(search.from) }),
  component: lazyRouteComponent(() => import('./pages/AgentEditorPage'), 'AgentEditorPage'),
})

/** Users and groups (admins change them; members see them). */
export const peopleRoute = createRoute({ getParentRoute: () => authed, path: '/people', component: PeoplePage })

/** Folders and who may do what in each. */
export const foldersRoute = createRoute({ getParentRoute: () => authed, path: '/folders', component: FoldersPage })

/** The caller's personal access tokens. */
export const tokensRoute = createRoute({ getParentRoute: () => authed, path: '/tokens', component: TokensPage })

/** The workspace's audit log (admins). */
export const auditRoute = createRoute({ getParentRoute: () => authed, path: '/audit', component: AuditPage })

const routeTree = rootRoute.addChildren([
  signInRoute,
  authed.addChildren([
    indexRoute,
    runsRoute,
    runRoute,
    approvalsRoute,
    workspaceRoute.addChildren([workspaceIndexRoute, itemRoute]),
    flowEditorRoute,
    agentEditorRoute,
    peopleRoute,
    foldersRoute,
    tokensRoute,
    auditRoute,
  ]),
])

export function makeRouter(queryClient: QueryClient) {
  return createRouter({ routeTree, context: { queryClient }, defaultPreload: false })
}

declare module '@tanstack/react-router' {
  interface Register {
    router: ReturnType<typeof makeRouter>
  }
}
