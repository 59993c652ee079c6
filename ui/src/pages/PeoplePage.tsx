/** Users and groups: everyone sees them; workspace admins add and change them. */
import { useMe } from '../api/auth'
import { useGroups, useUsers } from '../api/people'
import { AddUserForm } from '../components/admin/AddUserForm'
import { GroupsPanel } from '../components/admin/GroupsPanel'
import { isRefusal, Refusal } from '../components/admin/Refusal'
import { UsersTable } from '../components/admin/UsersTable'
import '../components/admin/admin.css'
import { ErrorBox } from '../components/ErrorBox'

export function PeoplePage() {
  const me = useMe()
  const users = useUsers()
  const groups = useGroups()
  const manage = me.data?.is_admin === true
  const refused = isRefusal(users.error) || isRefusal(groups.error)
  return (
    <section>
      <div className="page-head">
        <h1>People</h1>
      </div>
      {!manage && !refused && <p className="muted">Only workspace admins change users and groups; you see them as they are.</p>}
      {refused && (
        <Refusal title="You may not see the people of this workspace." error={users.error ?? groups.error}>
          Your credentials do not reach users and groups (a token needs the people:read scope).
        </Refusal>
      )}
      <section aria-labelledby="users-heading">
        <h2 id="users-heading">Users</h2>
        {manage && <AddUserForm />}
        {!isRefusal(users.error) && <ErrorBox error={users.error} />}
        {users.isPending && <p className="muted">Loading…</p>}
        {users.data && <UsersTable users={users.data} manage={manage} me={me.data?.user ?? ''} />}
      </section>
      <section aria-labelledby="groups-heading">
        <h2 id="groups-heading">Groups</h2>
        {!isRefusal(groups.error) && <ErrorBox error={groups.error} />}
        {groups.isPending && <p className="muted">Loading…</p>}
        {groups.data && <GroupsPanel groups={groups.data} users={users.data ?? []} manage={manage} />}
      </section>
    </section>
  )
}
