/**
 * A step's inputs and output in the step drawer: the values its latest attempt ran with and
 * gave, as the worker recorded them with the attempt's secrets masked (`***`); before that
 * (or for steps that record none) the inputs as the flow defines them.
 */
import { useJobDetail } from '../../api/runs'
import type { FlowStep } from '../../lib/flowSteps'
import type { StepState } from '../../lib/stepStates'
import { ErrorBox } from '../ErrorBox'
import { Json } from '../Json'

const ENDED = new Set(['succeeded', 'failed', 'cancelled'])

type Props = {
  runId: string
  step: FlowStep
  state: StepState | undefined
  /** The run's result, when this step is the run's last (shown when the job recorded no output). */
  runOutput?: { value: unknown } | null
}

export function StepIO({ runId, step, state, runOutput = null }: Props) {
  const latest = state?.jobs.length ? state.jobs[state.jobs.length - 1]! : null
  const ended = latest !== null && ENDED.has(latest.status)
  const detail = useJobDetail(runId, latest && ended ? latest.id : null, ended)
  const recorded = detail.data
  const inputs = recorded?.inputs ?? null
  const hasResult = recorded != null && recorded.inputs !== null
  return (
    <>
      <section aria-label="Inputs">
        <h3>Inputs</h3>
        {inputs !== null ? (
          <>
            <p className="muted small-text">
              As attempt {recorded?.attempt} ran with them, secrets masked (<code>***</code>).
            </p>
            <Json value={inputs} label={`Inputs of ${step.id}`} />
          </>
        ) : (
          <>
            <p className="muted small-text">
              As the run's flow defines them (expressions are evaluated when the step runs).
            </p>
            {Object.keys(step.inputs).length === 0 ? (
              <p className="muted">None.</p>
            ) : (
              <Json value={step.inputs} label={`Inputs of ${step.id} as defined`} />
            )}
          </>
        )}
      </section>
      <section aria-label="Output">
        <h3>Output</h3>
        <ErrorBox error={detail.error} title="The step's record could not be read" />
        {hasResult ? (
          <Json value={recorded.result} label={`Output of ${step.id}`} />
        ) : runOutput ? (
          <>
            <p className="muted small-text">The run's result, which this last step gave.</p>
            <Json value={runOutput.value} label={`Output of ${step.id}`} />
          </>
        ) : (
          <p className="muted">{ended ? 'This step records no output of its own.' : 'None yet.'}</p>
        )}
      </section>
    </>
  )
}
