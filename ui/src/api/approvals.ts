import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { api, unwrap } from './client'

/** The pending waits the caller may decide, oldest first (refetched every few seconds). */
export function usePendingApprovals(runId?: string, enabled = true) {
  return useQuery({
    queryKey: ['approvals', 'pending', runId ?? null],
    queryFn: () =>
      unwrap(api.GET('/api/approvals', { params: { query: { status: 'pending', run_id: runId } } })),
    refetchInterval: 5000,
    enabled,
  })
}

type Decision =
  | { action: 'approve'; comment?: string; edited_arguments?: Record<string, unknown> | null }
  | { action: 'reject'; comment?: string }
  | { action: 'answer'; text: string }
  | { action: 'extend'; new_limit: number | null }
  | { action: 'reconcile'; happened: boolean; result?: string }

function decide(id: string, decision: Decision) {
  const params = { path: { approval_id: id } }
  switch (decision.action) {
    case 'approve':
      return unwrap(
        api.POST('/api/approvals/{approval_id}/approve', {
          params,
          body: { comment: decision.comment || null, edited_arguments: decision.edited_arguments ?? null },
        }),
      )
    case 'reject':
      return unwrap(
        api.POST('/api/approvals/{approval_id}/reject', { params, body: { comment: decision.comment || null } }),
      )
    case 'answer':
      return unwrap(api.POST('/api/approvals/{approval_id}/answer', { params, body: { text: decision.text } }))
    case 'extend':
      return unwrap(
        api.POST('/api/approvals/{approval_id}/extend', { params, body: { new_limit: decision.new_limit } }),
      )
    case 'reconcile':
      return unwrap(
        api.POST('/api/approvals/{approval_id}/reconcile', {
          params,
          body: { happened: decision.happened, result: decision.happened ? decision.result || null : null },
        }),
      )
  }
}

export function useDecide(id: string) {
  const client = useQueryClient()
  return useMutation({
    mutationFn: (decision: Decision) => decide(id, decision),
    onSuccess: (row) => {
      void client.invalidateQueries({ queryKey: ['approvals'] })
      void client.invalidateQueries({ queryKey: ['runs', row.root_id] })
    },
  })
}
