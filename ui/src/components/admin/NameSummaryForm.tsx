/** A form that creates something named, with an optional summary (a folder, a group). */
import type { UseMutationResult } from '@tanstack/react-query'
import { type ReactNode, useState } from 'react'
import { ErrorBox } from '../ErrorBox'

type Props = {
  /** The form's name and heading ("Create a folder"). */
  title: string
  heading: 'h2' | 'h3'
  /** What is named ("Folder"): the fields are "<noun> name" and "Summary (optional)". */
  noun: string
  /** The submit button's text. */
  submit: string
  /** The title of the error shown when the server refuses. */
  refused: string
  add: UseMutationResult<unknown, Error, { name: string; summary: string }>
  children?: ReactNode
}

export function NameSummaryForm({ title, heading: Heading, noun, submit, refused, add, children }: Props) {
  const [name, setName] = useState('')
  const [summary, setSummary] = useState('')
  const id = `new-${noun.toLowerCase()}`
  return (
    <form
      className="admin-form"
      aria-label={title}
      onSubmit={(e) => {
        e.preventDefault()
        add.mutate(
          { name: name.trim(), summary },
          {
            onSuccess: () => {
              setName('')
              setSummary('')
            },
          },
        )
      }}
    >
      <Heading>{title}</Heading>
      <div className="row">
        <div className="field">
          <label htmlFor={`${id}-name`}>{noun} name</label>
          <input id={`${id}-name`} value={name} required maxLength={64} onChange={(e) => setName(e.target.value)} />
        </div>
        <div className="field grow">
          <label htmlFor={`${id}-summary`}>Summary (optional)</label>
          <input id={`${id}-summary`} value={summary} onChange={(e) => setSummary(e.target.value)} />
        </div>
        <button type="submit" className="primary" disabled={add.isPending || !name.trim()}>
          {submit}
        </button>
      </div>
      {children}
      <ErrorBox error={add.error} title={refused} />
    </form>
  )
}
