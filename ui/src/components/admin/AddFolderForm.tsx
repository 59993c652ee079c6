/** Create a folder (workspace admins); its grants are given on its card once it exists. */
import { useState } from 'react'
import { useAddFolder } from '../../api/people'
import { ErrorBox } from '../ErrorBox'

export function AddFolderForm() {
  const add = useAddFolder()
  const [name, setName] = useState('')
  const [summary, setSummary] = useState('')
  return (
    <form
      className="admin-form"
      aria-label="Create a folder"
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
      <h2>Create a folder</h2>
      <div className="row">
        <div className="field">
          <label htmlFor="new-folder-name">Folder name</label>
          <input id="new-folder-name" value={name} required maxLength={64} onChange={(e) => setName(e.target.value)} />
        </div>
        <div className="field grow">
          <label htmlFor="new-folder-summary">Summary (optional)</label>
          <input id="new-folder-summary" value={summary} onChange={(e) => setSummary(e.target.value)} />
        </div>
        <button type="submit" className="primary" disabled={add.isPending || !name.trim()}>
          Create the folder
        </button>
      </div>
      <ErrorBox error={add.error} title="Not created" />
    </form>
  )
}
