/** The copilot's chat (`/api/copilot/{flow path}`): the caller's conversation about a flow, its turns. */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { api, unwrap } from './client'
import type { components } from './schema'

export type Conversation = components['schemas']['ConversationOut']
export type Turn = components['schemas']['TurnOut']

export const conversationKey = (path: string) => ['copilot', path] as const

/** The conversation so far; refetched every few seconds while a turn is in flight. */
export function useConversation(path: string) {
  return useQuery({
    queryKey: conversationKey(path),
    queryFn: () => unwrap(api.GET('/api/copilot/{path}', { params: { path: { path } } })),
    refetchInterval: (query) => (query.state.data?.running ? 2000 : false),
  })
}

/** Start a turn (refused with 409 while the previous one is in flight). */
export function useSendMessage(path: string) {
  const client = useQueryClient()
  return useMutation({
    mutationFn: (message: string) =>
      unwrap(api.POST('/api/copilot/{path}/messages', { params: { path: { path } }, body: { message, model: null } })),
    onSuccess: () => void client.invalidateQueries({ queryKey: conversationKey(path) }),
  })
}

/** Forget the conversation: the next message starts a new one. */
export function useForgetConversation(path: string) {
  const client = useQueryClient()
  return useMutation({
    mutationFn: () => unwrap(api.DELETE('/api/copilot/{path}', { params: { path: { path } } })),
    onSuccess: () => void client.invalidateQueries({ queryKey: conversationKey(path) }),
  })
}
