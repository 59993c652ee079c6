import { Link, useNavigate, useParams, useSearch } from '@tanstack/react-router'
import { lazy, Suspense, useMemo } from 'react'
import { usePendingApprovals } from '../api/approvals'
import { useRunEvents } from '../api/events'
import {
  ACTIVE,
  useJobs,
  useRun,
  useRunActions,
  useRunApprovals,
  useRunFlow,
  useRunUsage,
  useRunWaits,
} from '../api/runs'
import type { Job } from '../api/types'
import { ErrorBox } from '../components/ErrorBox'
import { Json } from '../components/Json'
import { StatusBadge } from '../components/StatusBadge'
import { StepDrawer } from '../components/StepDrawer'
import { OrphanSteps } from '../components/run/OrphanSteps'
import { Timeline } from '../components/run/Timeline'
import { useDagChildren } from '../components/run/useDagChildren'
import { WaitList } from '../components/triggers/WaitList'
import { withWaits } from '../components/triggers/waits'
import { type FlowStep, flowSteps } from '../lib/flowSteps'
import { elapsed, formatCost, formatDuration, formatTime } from '../lib/format'
import { stepStates } from '../lib/stepStates'
import { useNow } from '../lib/useNow'

// React Flow is most of the bundle: it loads with the first run page, not with sign-in.
const RunDag = lazy(() => import('../components/RunDag').then((m) => ({ default: m.RunDag })))

/** When the run's flow cannot be read: the steps that have jobs, in the order they started. */
function stepsFromJobs(runId: string, jobs: readonly Job[]): FlowStep[] {
  const seen = new Set<string>()
  const steps: FlowStep[] = []
  for (const job of jobs) {
    if (job.run_id !== runId || seen.has(job.step_id)) continue
    seen.add(job.step_id)
    steps.push({ id: job.step_id, kind: 'step', summary: '', needs: [], inputs: {} })
  }
  return steps
}

export function RunPage() {
  const { runId } = useParams({ from: '/authed/runs/$runId' })
  const { step: selected } = useSearch({ from: '/authed/runs/$runId' })
  const navigate = useNavigate({ from: '/runs/$runId' })
  const run = useRun(runId)
  const active = run.data ? ACTIVE.has(run.data.status) : true
  const jobs = useJobs(runId, active)
  const waits = useRunWaits(runId, active)
  const usage = useRunUsage(runId)
  const flow = useRunFlow(runId)
  const approvals = usePendingApprovals(runId, active)
  const now = useNow(active)
  const { events, live, truncated } = useRunEvents(runId, active)
  const { cancel, retry } = useRunActions(runId)
  const decided = useRunApprovals(runId, active)
  const steps = useMemo(() => {
    const fromFlow = flowSteps(flow.data?.definition)
    return fromFlow.length > 0 ? fromFlow : stepsFromJobs(runId, jobs.data ?? [])
  }, [flow.data, jobs.data, runId])
  const states = useMemo(
    () => withWaits(stepStates(runId, jobs.data ?? [], now), active ? (waits.data ?? []) : [], runId),
    [runId, jobs.data, now, waits.data, active],
  )
  const { expandable, expanded, toggle, orphans } = useDagChildren(runId, steps, jobs.data, events)
  const cost = usage.data?.reduce<number | null>(
    (sum, u) => (u.cost_usd == null ? sum : (sum ?? 0) + u.cost_usd),
    null,
  )

  if (run.isPending) return <p className="muted">Loading the run…</p>
  if (run.error) return <ErrorBox error={run.error} />
  const r = run.data
  const title = r.path ?? r.flow
  const selectedStep = steps.find((s) => s.id === selected)
  const select = (id: string | undefined) => void navigate({ search: { step: id }, replace: true })

  return (
    <section className="run-page">
      <p className="crumbs">
        <Link to="/runs" search={{}}>
          Runs
        </Link>{' '}
        / {r.id}
      </p>
      <div className="page-head">
        <h1>
          Run of <span className="mono">{title}</span>
        </h1>
        <StatusBadge status={r.status} label="Run status" />
        {live && <span className="live">live</span>}
        <span className="spacer" />
        {ACTIVE.has(r.status) && (
          <button type="button" disabled={cancel.isPending} onClick={() => cancel.mutate()}>
            Cancel
          </button>
        )}
        {r.status === 'failed' && (
          <button type="button" disabled={retry.isPending} onClick={() => retry.mutate()}>
            Retry
          </button>
        )}
      </div>
      <ErrorBox error={cancel.error ?? retry.error} />
      <dl className="facts">
        <dt>Started by</dt>
        <dd>{r.run_as ?? '—'}</dd>
        <dt>Started at</dt>
        <dd>{formatTime(r.created_at)}</dd>
        <dt>Duration</dt>
        <dd>{formatDuration(elapsed(r.created_at, r.finished_at, now))}</dd>
        <dt>Version</dt>
        <dd>{r.draft ? 'draft' : r.version != null ? `v${r.version}` : '—'}</dd>
        <dt>Cost</dt>
        <dd>{usage.data && usage.data.length > 0 ? formatCost(cost) : '—'}</dd>
      </dl>
      {r.inputs && Object.keys(r.inputs).length > 0 && (
        <details className="run-inputs">
          <summary>Inputs</summary>
          <p className="muted small-text">As submitted: workspace references ($var:, $res:) stay unresolved.</p>
          <Json value={r.inputs} />
        </details>
      )}
      {(waits.data ?? []).some((w) => w.approval_id) && (
        <p className="notice">
          This run waits for a decision.{' '}
          <Link to="/approvals" search={{ run: r.id }}>
            Open its approvals
          </Link>
        </p>
      )}
      {ACTIVE.has(r.status) && (waits.data ?? []).length > 0 && (
        <section aria-labelledby="waits-head">
          <h2 id="waits-head">What it waits for</h2>
          <WaitList waits={waits.data!} now={now} runPath={r.path ?? null} />
        </section>
      )}
      {r.error && (
        <div className="error-box">
          <strong>Failed{typeof r.error.step === 'string' ? ` at ${r.error.step}` : ''}: </strong>
          {typeof r.error.message === 'string' ? r.error.message : <Json value={r.error} />}
        </div>
      )}
      <ErrorBox error={jobs.error} />
      <div className={`run-body${selectedStep ? ' with-drawer' : ''}`}>
        {flow.isPending ? (
          // Laid out once, from the run's flow: not first from its jobs, then again.
          <p className="muted">Loading the steps…</p>
        ) : steps.length > 0 ? (
          <Suspense fallback={<p className="muted">Loading the graph…</p>}>
            <RunDag
              steps={steps}
              states={states}
              ended={!ACTIVE.has(r.status)}
              selected={selected ?? null}
              onSelect={(id) => select(id === selected ? undefined : id)}
              expandable={expandable}
              expanded={expanded}
              onToggle={toggle}
            />
          </Suspense>
        ) : (
          <p className="muted">No steps have started yet.</p>
        )}
        {selectedStep && (
          <StepDrawer
            runId={r.id}
            step={selectedStep}
            state={states.get(selectedStep.id)}
            events={events}
            waits={waits.data ?? []}
            approvals={approvals.data ?? []}
            truncated={truncated}
            active={active}
            output={lastStepOutput(r.status, r.result, flow.data?.definition, steps, selectedStep.id)}
            onClose={() => select(undefined)}
          />
        )}
      </div>
      {orphans.size > 0 && <OrphanSteps orphans={orphans} />}
      <section aria-labelledby="timeline-head">
        <h2 id="timeline-head">Timeline</h2>
        <Timeline runId={runId} jobs={jobs.data ?? []} approvals={decided.data ?? []} waits={waits.data ?? []} now={now} />
      </section>
      {r.status === 'succeeded' && (
        <section aria-labelledby="result-head">
          <h2 id="result-head">Result</h2>
          <Json value={r.result} />
        </section>
      )}
    </section>
  )
}

/** The run's result is its last step's output when the flow names no `result`. */
function lastStepOutput(
  status: string,
  result: unknown,
  definition: Record<string, unknown> | undefined,
  steps: readonly FlowStep[],
  stepId: string,
): { value: unknown } | null {
  if (status !== 'succeeded' || !definition || definition.result != null) return null
  return steps[steps.length - 1]?.id === stepId ? { value: result } : null
}
