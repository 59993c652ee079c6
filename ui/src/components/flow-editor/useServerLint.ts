/** The server's checks of the flow's text, once it parses and the schema has nothing to say. */
import { useQuery } from '@tanstack/react-query'
import { useMemo } from 'react'
import type { ParsedFlow, TextProblem } from '../../lib/flowYaml'
import { lintTextProblems } from '../../lib/flowYamlProblems'
import { lintFlow } from './lintFlow'

export function useServerLint(path: string, text: string, checked: ParsedFlow): { problems: TextProblem[]; note: string | null } {
  const ready = checked.value !== null && checked.problems.every((p) => p.severity !== 'error')
  const lint = useQuery({
    queryKey: ['flow-editor', 'lint', path, text],
    queryFn: ({ signal }) => lintFlow(path, text, signal),
    enabled: ready,
    retry: false,
    staleTime: Infinity,
  })
  return useMemo(() => {
    if (!ready) return { problems: [], note: 'The server checks the flow once these are fixed.' }
    if (lint.error) return { problems: [], note: `The server could not check it: ${(lint.error as Error).message}` }
    if (!lint.data) return { problems: [], note: lint.isFetching ? 'The server is checking it…' : null }
    return { problems: lintTextProblems(checked.doc, text, checked.value, lint.data.problems), note: null }
  }, [ready, lint.error, lint.data, lint.isFetching, checked, text])
}
