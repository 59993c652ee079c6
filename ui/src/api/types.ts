/** Names for the API's shapes, all taken from the generated OpenAPI types. */
import type { components, operations } from './schema'

type S = components['schemas']

export type Me = S['Me']
export type Session = S['Session']
export type Run = S['RunOut']
export type RunPage = S['RunPage']
export type RunItem = S['RunItem']
export type RunFlow = S['RunFlowOut']
export type Job = S['JobOut']
export type LogChunk = S['LogOut']
export type Usage = S['UsageOut']
export type RunWait = S['WaitOut']
export type RunEvent = S['EventOut']
export type Message = S['Message']
export type Approval = S['ApprovalOut']
export type ItemInfo = S['ItemInfo']
export type Item = S['ItemOut']
export type VersionInfo = S['VersionInfo']
export type SearchHit = S['SearchHitOut']
export type Diff = S['DiffOut']
export type RunStatus = NonNullable<NonNullable<operations["list_runs_api_runs_get"]["parameters"]["query"]>["status"]>
