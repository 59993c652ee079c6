/** The folders the caller can reach, and who may do what in each (their admins change it). */
import { Link } from '@tanstack/react-router'
import { useId } from 'react'
import { useMe } from '../api/auth'
import { useFolders } from '../api/items'
import { type Folder, useGroups, useUsers } from '../api/people'
import type { Me } from '../api/types'
import { AddFolderForm } from '../components/admin/AddFolderForm'
import { FolderGrants } from '../components/admin/FolderGrants'
import { granteeNames, roleOn } from '../components/admin/grants'
import { ItemGrantForm } from '../components/admin/ItemGrantForm'
import { NewValueForm } from '../components/admin/NewValueForm'
import '../components/admin/admin.css'
import { ErrorBox } from '../components/ErrorBox'
import { formatTime } from '../lib/format'

function FolderCard({ folder, me, grantees }: { folder: Folder; me: Me; grantees: string[] }) {
  const id = useId()
  const role = roleOn(folder, me)
  return (
    <article className="card folder-card" aria-labelledby={id} data-folder={folder.name}>
      <div className="page-head">
        <h2 id={id} className="mono">
          <Link to="/workspace" search={{ prefix: `f/${folder.name}/` }}>
            f/{folder.name}/
          </Link>
        </h2>
        {role && <span className="badge">you: {role}</span>}
      </div>
      {folder.summary && <p>{folder.summary}</p>}
      <p className="muted small-text">
        Created {formatTime(folder.created_at)} by {folder.created_by}
      </p>
      <h3>Permissions</h3>
      <FolderGrants folder={folder} manage={role === 'admin'} grantees={grantees} />
    </article>
  )
}

export function FoldersPage() {
  const me = useMe()
  const folders = useFolders()
  const users = useUsers()
  const groups = useGroups()
  const grantees = granteeNames(users.data ?? [], groups.data ?? [])
  const admin = me.data?.is_admin === true
  // Item grants need the admin role on the item: offered to whoever administers a folder.
  const administers = admin || (me.data ? (folders.data ?? []).some((f) => roleOn(f, me.data!) === 'admin') : false)
  return (
    <section>
      <div className="page-head">
        <h1>Folders</h1>
      </div>
      <p className="muted">
        The folders you can reach. A folder grants users and groups (g/&lt;group&gt;) a role: viewer reads and runs, writer
        also changes, admin also decides who may do what.
      </p>
      {admin && <AddFolderForm />}
      <ErrorBox error={folders.error} />
      {folders.isPending && <p className="muted">Loading…</p>}
      {folders.data?.length === 0 && <p className="empty">No folder you can reach.</p>}
      {me.data && folders.data?.map((f) => <FolderCard key={f.name} folder={f} me={me.data!} grantees={grantees} />)}
      {administers && <ItemGrantForm grantees={grantees} />}
      {folders.data && folders.data.length > 0 && <NewValueForm folders={folders.data.map((f) => f.name)} />}
    </section>
  )
}
