import { useInfiniteQuery, useMutation, useQueries, useQuery, useQueryClient } from '@tanstack/react-query'
import { api, unwrap } from './client'
import type { components } from './schema'
import type { Run, RunStatus } from './types'

export const ACTIVE: ReadonlySet<string> = new Set(['queued', 'running', 'waiting'])

export interface RunFilters {
  status?: RunStatus
  path?: string
  /** A folder (`f/team/`), optionally with more of the path. */
  path_prefix?: string
  /** Who started the runs (the user they run as). */
  started_by?: string
  /** Submitted at or after / before these times, in seconds since the epoch. */
  started_after?: number
  started_before?: number
}

const PAGE = 50

/**
 * The runs the caller sees, newest first, a keyset page at a time; refetched while some run is active.
 *
 * `poll`: the refetch interval instead (ms, or false: none), for a list that learns of changes otherwise.
 */
export function useRunPages(filters: RunFilters, poll?: number | false) {
  return useInfiniteQuery({
    queryKey: ['runs', 'list', filters],
    initialPageParam: undefined as string | undefined,
    queryFn: ({ pageParam }) =>
      unwrap(
        api.GET('/api/runs', {
          params: { query: { ...filters, limit: PAGE, cursor: pageParam } },
        }),
      ),
    getNextPageParam: (last) => last.next_cursor ?? undefined,
    refetchInterval: (query) => {
      if (poll !== undefined) return poll
      const pages = query.state.data?.pages ?? []
      return pages.some((p) => p.runs.some((r) => ACTIVE.has(r.status))) ? 3000 : 15000
    },
  })
}

export function useRun(runId: string) {
  return useQuery({
    queryKey: ['runs', runId],
    queryFn: () => unwrap(api.GET('/api/runs/{run_id}', { params: { path: { run_id: runId } } })),
    refetchInterval: (query) => (query.state.data && ACTIVE.has(query.state.data.status) ? 5000 : false),
  })
}

export function useJobs(runId: string, active: boolean) {
  return useQuery({
    queryKey: ['runs', runId, 'jobs'],
    queryFn: () =>
      unwrap(api.GET('/api/runs/{run_id}/jobs', { params: { path: { run_id: runId } } })),
    refetchInterval: active ? 5000 : false,
  })
}

export function useRunWaits(runId: string, active: boolean) {
  return useQuery({
    queryKey: ['runs', runId, 'waits'],
    queryFn: () =>
      unwrap(api.GET('/api/runs/{run_id}/waits', { params: { path: { run_id: runId } } })),
    enabled: active,
  })
}

export function useRunUsage(runId: string) {
  return useQuery({
    queryKey: ['runs', runId, 'usage'],
    queryFn: () =>
      unwrap(api.GET('/api/runs/{run_id}/usage', { params: { path: { run_id: runId } } })),
  })
}

function transcriptQuery(runId: string, stepId: string) {
  return {
    queryKey: ['runs', runId, 'transcript', stepId],
    queryFn: () =>
      unwrap(
        api.GET('/api/runs/{run_id}/steps/{step_id}/transcript', {
          params: { path: { run_id: runId, step_id: stepId } },
        }),
      ),
  }
}

export function useTranscript(runId: string, stepId: string, enabled: boolean) {
  return useQuery({ ...transcriptQuery(runId, stepId), enabled })
}

/** The transcripts of several agent steps (the DAG's expanded ones), by step id. */
export function useTranscripts(runId: string, stepIds: readonly string[]) {
  return useQueries({
    queries: stepIds.map((id) => transcriptQuery(runId, id)),
    combine: (results) => new Map(stepIds.map((id, i) => [id, results[i]?.data])),
  })
}

/** The flow definition a run executes, as stored with it (a draft's, or a Python-submitted flow, too). */
export function useRunFlow(runId: string) {
  return useQuery({
    // Not under ['runs', runId]: the events' refreshes of the run need not read it again.
    queryKey: ['run-flows', runId],
    queryFn: () => unwrap(api.GET('/api/runs/{run_id}/flow', { params: { path: { run_id: runId } } })),
    retry: false,
    // What a run executes never changes after it was submitted.
    staleTime: Infinity,
  })
}

export function useRunActions(runId: string) {
  const client = useQueryClient()
  const refresh = (run: Run) => {
    client.setQueryData(['runs', runId], run)
    void client.invalidateQueries({ queryKey: ['runs'] })
  }
  const cancel = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/api/runs/{run_id}/cancel', { params: { path: { run_id: runId } } })),
    onSuccess: refresh,
  })
  const retry = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/api/runs/{run_id}/retry', { params: { path: { run_id: runId } } })),
    onSuccess: refresh,
  })
  return { cancel, retry }
}

/** Every wait for a person of the run (pending and decided) the caller sees, oldest first. */
export function useRunApprovals(runId: string, active: boolean) {
  return useQuery({
    // Under ['approvals']: the run's events and every decision refetch it.
    queryKey: ['approvals', 'run', runId],
    queryFn: () => unwrap(api.GET('/api/approvals', { params: { query: { status: 'any', run_id: runId } } })),
    refetchInterval: active ? 5000 : false,
  })
}

/** One entry of an agent step's journal: what it recorded, and whether the step's latest execution
 * replayed it (read it back, not did it again) or ran it live. */
export type JournalEntry = components['schemas']['JournalEntryOut']

export function useJournal(runId: string, stepId: string, active: boolean) {
  return useQuery({
    queryKey: ['runs', runId, 'journal', stepId],
    queryFn: () =>
      unwrap(
        api.GET('/api/runs/{run_id}/steps/{step_id}/journal', {
          params: { path: { run_id: runId, step_id: stepId } },
        }),
      ),
    refetchInterval: active ? 5000 : false,
    retry: false,
  })
}

/** One job (attempt) of a run with its evaluated inputs and its result, the job's secrets masked
 * (`null` for a job that recorded none: a branch, a loop, one that has not ended). */
export function useJobDetail(runId: string, jobId: number | null, finished: boolean) {
  return useQuery({
    queryKey: ['runs', runId, 'job', jobId],
    queryFn: () =>
      unwrap(
        api.GET('/api/runs/{run_id}/jobs/{job_id}', {
          params: { path: { run_id: runId, job_id: jobId ?? 0 } },
        }),
      ),
    enabled: jobId !== null,
    // A finished job's record does not change; a running one's is fetched again when it ends.
    staleTime: finished ? Infinity : 0,
    retry: false,
  })
}
