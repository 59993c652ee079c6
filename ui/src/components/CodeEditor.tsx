/** A CodeMirror 6 editor for Python, YAML or JSON text. */
import { json } from '@codemirror/lang-json'
import { python } from '@codemirror/lang-python'
import { yaml } from '@codemirror/lang-yaml'
import { EditorState } from '@codemirror/state'
import { EditorView } from '@codemirror/view'
import { basicSetup } from 'codemirror'
import { useEffect, useRef } from 'react'
import { readableHighlighting } from './codeHighlight'

export type Language = 'python' | 'yaml' | 'json'

const LANGUAGES = { python, yaml, json }

type Props = {
  value: string
  onChange: (value: string) => void
  language: Language
  /** The editor's accessible name. */
  label: string
}

export function CodeEditor({ value, onChange, language, label }: Props) {
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
          LANGUAGES[language](),
          EditorView.contentAttributes.of({ 'aria-label': label }),
          EditorView.updateListener.of((update) => {
            if (update.docChanged) changed.current(update.state.doc.toString())
          }),
        ],
      }),
    })
    view.current = editor
    return () => {
      editor.destroy()
      view.current = null
    }
    // The editor is made once per language; `value` changes arrive below.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [language, label])

  useEffect(() => {
    const editor = view.current
    if (editor && editor.state.doc.toString() !== value)
      editor.dispatch({ changes: { from: 0, to: editor.state.doc.length, insert: value } })
  }, [value])

  return <div className="code-editor" ref={host} />
}
