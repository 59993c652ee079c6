/** Groups and their members; admins add and delete groups and change who is in them. */
import { useId, useState } from 'react'
import { type Group, type User, useAddGroup, useDeleteGroup, useSetMember } from '../../api/people'
import { ErrorBox } from '../ErrorBox'
import { NameSummaryForm } from './NameSummaryForm'

function AddGroupForm() {
  return (
    <NameSummaryForm
      title="Add a group"
      heading="h3"
      noun="Group"
      submit="Add the group"
      refused="Not added"
      add={useAddGroup()}
    >
      <p className="muted small-text">Grants name a group g/&lt;name&gt;.</p>
    </NameSummaryForm>
  )
}

function GroupCard({ group, users, manage }: { group: Group; users: User[]; manage: boolean }) {
  const setMember = useSetMember()
  const remove = useDeleteGroup()
  const [adding, setAdding] = useState('')
  const id = useId()
  const others = users.filter((u) => !group.members.includes(u.name))
  const headingId = `${id}-h`
  return (
    <article className="card" aria-labelledby={headingId} data-group={group.name}>
      <header>
        <h2 id={headingId} className="mono">
          g/{group.name}
        </h2>
        {manage && (
          <button
            type="button"
            className="small danger"
            disabled={remove.isPending}
            onClick={() => {
              if (window.confirm(`Delete the group ${group.name}, its memberships and its grants?`)) remove.mutate(group.name)
            }}
          >
            Delete the group {group.name}
          </button>
        )}
      </header>
      {group.summary && <p>{group.summary}</p>}
      <h3>Members</h3>
      {group.members.length === 0 ? (
        <p className="muted">No members.</p>
      ) : (
        <ul className="member-list" aria-label={`Members of ${group.name}`}>
          {group.members.map((m) => (
            <li key={m}>
              <span className="mono">{m}</span>
              {manage && (
                <button
                  type="button"
                  className="small"
                  aria-label={`Remove ${m} from ${group.name}`}
                  disabled={setMember.isPending}
                  onClick={() => setMember.mutate({ group: group.name, user: m, member: false })}
                >
                  ×
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
      {manage && others.length > 0 && (
        <form
          className="admin-inline-form"
          onSubmit={(e) => {
            e.preventDefault()
            if (adding) setMember.mutate({ group: group.name, user: adding, member: true }, { onSuccess: () => setAdding('') })
          }}
        >
          <label htmlFor={`${id}-add`}>Add a member to {group.name}</label>
          <select id={`${id}-add`} value={adding} onChange={(e) => setAdding(e.target.value)}>
            <option value="">—</option>
            {others.map((u) => (
              <option key={u.name} value={u.name}>
                {u.name}
              </option>
            ))}
          </select>
          <button type="submit" className="small" disabled={!adding || setMember.isPending}>
            Add to {group.name}
          </button>
        </form>
      )}
      <ErrorBox error={setMember.error ?? remove.error} title="Not changed" />
    </article>
  )
}

export function GroupsPanel({ groups, users, manage }: { groups: Group[]; users: User[]; manage: boolean }) {
  return (
    <>
      {manage && <AddGroupForm />}
      {groups.length === 0 ? (
        <p className="muted">No groups yet.</p>
      ) : (
        <div className="cards">
          {groups.map((g) => (
            <GroupCard key={g.name} group={g} users={users} manage={manage} />
          ))}
        </div>
      )}
    </>
  )
}
