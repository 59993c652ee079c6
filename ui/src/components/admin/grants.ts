import type { Me } from '../../api/types'
import type { Folder, Role } from '../../api/people'

const RANK: Record<Role, number> = { viewer: 1, writer: 2, admin: 3 }

/** The caller's role on a folder: the highest of its own grant and its groups' (admins: admin). */
export function roleOn(folder: Folder, me: Me): Role | null {
  if (me.is_admin) return 'admin'
  const mine = [folder.roles[me.user], ...me.groups.map((g) => folder.roles[`g/${g}`])].filter(
    (r): r is Role => r !== undefined,
  )
  return mine.reduce<Role | null>((best, r) => (best === null || RANK[r] > RANK[best] ? r : best), null)
}

/** Who may be granted a role: every user, and every group as `g/<name>`. */
export function granteeNames(users: readonly { name: string }[], groups: readonly { name: string }[]): string[] {
  return [...users.map((u) => u.name), ...groups.map((g) => `g/${g.name}`)]
}
