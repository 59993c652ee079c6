/** Create a folder (workspace admins); its grants are given on its card once it exists. */
import { useAddFolder } from '../../api/people'
import { NameSummaryForm } from './NameSummaryForm'

export function AddFolderForm() {
  return (
    <NameSummaryForm
      title="Create a folder"
      heading="h2"
      noun="Folder"
      submit="Create the folder"
      refused="Not created"
      add={useAddFolder()}
    />
  )
}
