/** Schedules (items of kind `schedule`, their next fires and history), events sent to waiting runs. */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { api, unwrap } from './client'
import type { components } from './schema'

type S = components['schemas']

export type Schedule = S['ScheduleOut']
export type Fire = S['FireOut']
export type SendEventIn = S['EventIn']
export type SentEvent = S['DeliveryOut']

/** A schedule item's value, as `PUT /api/items/{path}` writes it (kind `schedule`). */
export interface ScheduleValue {
  cron: string
  timezone: string
  target: string
  inputs: Record<string, unknown>
  enabled: boolean
  catch_up: 'latest' | 'all' | 'skip'
  on_failure?: string | null
  on_recovery?: string | null
}

/** The schedules the caller may read under `under` (a folder or path prefix; '' for all). */
export function useSchedules(under = '') {
  return useQuery({
    queryKey: ['schedules', 'list', under],
    queryFn: () => unwrap(api.GET('/api/schedules', { params: { query: under ? { under } : {} } })),
  })
}

/** One schedule with its next fires; refetched every minute (the next fires move on). */
export function useSchedule(path: string) {
  return useQuery({
    queryKey: ['schedules', path],
    queryFn: () => unwrap(api.GET('/api/schedules/{path}', { params: { path: { path } } })),
    refetchInterval: 60_000,
  })
}

/** A schedule's latest fires, newest first. */
export function useScheduleFires(path: string, limit = 50) {
  return useQuery({
    queryKey: ['schedules', path, 'fires', limit],
    queryFn: () =>
      unwrap(api.GET('/api/schedules/{path}/fires', { params: { path: { path }, query: { limit } } })),
    refetchInterval: 30_000,
  })
}

/** Pause or resume a schedule (it takes effect at its next fire). */
export function useScheduleSwitch(path: string) {
  const client = useQueryClient()
  return useMutation({
    mutationFn: (action: 'pause' | 'resume') =>
      unwrap(
        action === 'pause'
          ? api.POST('/api/schedules/{path}/pause', { params: { path: { path } } })
          : api.POST('/api/schedules/{path}/resume', { params: { path: { path } } }),
      ),
    onSuccess: (schedule) => {
      client.setQueryData(['schedules', path], schedule)
      void client.invalidateQueries({ queryKey: ['schedules'] })
      void client.invalidateQueries({ queryKey: ['items', path] })
    },
  })
}

/** Write a new schedule item at `path` (refused with 409 when something is there already). */
export function useCreateSchedule() {
  const client = useQueryClient()
  return useMutation({
    mutationFn: ({ path, value }: { path: string; value: ScheduleValue }) =>
      unwrap(
        api.PUT('/api/items/{path}', {
          params: { path: { path } },
          body: { kind: 'schedule', value, base_version: 0, message: 'New schedule' },
        }),
      ),
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: ['items'] })
      void client.invalidateQueries({ queryKey: ['schedules'] })
    },
  })
}

/** Send an event (to the runs waiting for its name and key, or kept for those that come later). */
export function useSendEvent() {
  const client = useQueryClient()
  return useMutation({
    mutationFn: (body: SendEventIn) => unwrap(api.POST('/api/events', { body })),
    onSuccess: () => void client.invalidateQueries({ queryKey: ['runs'] }),
  })
}
