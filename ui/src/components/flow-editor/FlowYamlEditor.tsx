/** The flow's YAML in CodeMirror: completion from the flow's JSON Schema, and the problems found shown inline. */
import { type CompletionContext, type CompletionResult } from '@codemirror/autocomplete'
import { yaml, yamlLanguage } from '@codemirror/lang-yaml'
import { type Diagnostic, lintGutter, setDiagnostics } from '@codemirror/lint'
import { Annotation, EditorState } from '@codemirror/state'
import { EditorView } from '@codemirror/view'
import { basicSetup } from 'codemirror'
import { useEffect, useRef } from 'react'
import { flowSuggestions } from '../../lib/flowSchemaComplete'
import { readableHighlighting } from '../codeHighlight'
import type { TextProblem } from '../../lib/flowYaml'

function complete(context: CompletionContext): CompletionResult | null {
  const found = flowSuggestions(context.state.doc.toString(), context.pos)
  if (!found) return null
  // Offer keys while typing a word, or on request (Ctrl-Space) on an empty one.
  if (found.from === context.pos && !context.explicit) return null
  return {
    from: found.from,
    options: found.options.map((o) => ({ label: o.label, apply: o.apply, type: o.type, info: o.info || undefined })),
    validFor: /^[\w-]*$/,
  }
}

/** Marks a change that came from `value` (a reload, a discard), not from typing. */
const external = Annotation.define<boolean>()

const SOURCES = { yaml: 'YAML', schema: 'schema', server: 'server' } as const

type Props = {
  value: string
  onChange: (value: string) => void
  problems: readonly TextProblem[]
  label: string
}

export function FlowYamlEditor({ value, onChange, problems, label }: Props) {
  const host = useRef<HTMLDivElement>(null)
  const view = useRef<EditorView | null>(null)
  const changed = useRef(onChange)
  changed.current = onChange

  useEffect(() => {
    if (!host.current) return
    const editor = new EditorView({
      parent: host.current,
      state: EditorState.create({
        doc: value,
        extensions: [
          basicSetup,
          readableHighlighting,
          yaml(),
          yamlLanguage.data.of({ autocomplete: complete }),
          lintGutter(),
          EditorView.contentAttributes.of({ 'aria-label': label }),
          EditorView.updateListener.of((update) => {
            if (update.docChanged && !update.transactions.some((t) => t.annotation(external)))
              changed.current(update.state.doc.toString())
          }),
        ],
      }),
    })
    view.current = editor
    return () => {
      editor.destroy()
      view.current = null
    }
    // Made once; `value` and `problems` arrive below.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [label])

  useEffect(() => {
    const editor = view.current
    if (editor && editor.state.doc.toString() !== value)
      editor.dispatch({ changes: { from: 0, to: editor.state.doc.length, insert: value }, annotations: external.of(true) })
  }, [value])

  useEffect(() => {
    const editor = view.current
    if (!editor) return
    const length = editor.state.doc.length
    const diagnostics: Diagnostic[] = problems
      // Positions are for the text they were found in: drop those past the end of the current one.
      .filter((p) => p.from <= length)
      .map((p) => ({
        from: p.from,
        to: Math.min(p.to, length),
        severity: p.severity,
        message: p.message,
        source: SOURCES[p.source],
      }))
    editor.dispatch(setDiagnostics(editor.state, diagnostics))
  }, [problems])

  return <div className="code-editor flow-yaml-editor" ref={host} />
}
