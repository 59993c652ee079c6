/**
 * `/edit/<flow path>`: the flow's YAML (schema completion, problems inline) beside its
 * graph, on the caller's draft (autosaved); the selected step's panel; run the draft;
 * deploy it, with the drafts of the agents it links.
 */
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { Link, useNavigate, useParams } from '@tanstack/react-router'
import { useMemo, useState } from 'react'
import { api, unwrap } from '../api/client'
import { draftKey, fetchDraft, useDiscardDraft } from '../api/drafts'
import { CopilotPanel } from '../components/copilot/CopilotPanel'
import { ErrorBox } from '../components/ErrorBox'
import { DeployDialog } from '../components/flow-editor/DeployDialog'
import { FlowGraph, type GraphAgent } from '../components/flow-editor/FlowGraph'
import { FlowYamlEditor } from '../components/flow-editor/FlowYamlEditor'
import { ProblemList } from '../components/flow-editor/ProblemList'
import { RunDraft } from '../components/flow-editor/RunDraft'
import { SaveStatus } from '../components/flow-editor/SaveStatus'
import { StepPanel } from '../components/flow-editor/StepPanel'
import { useDebounced } from '../components/flow-editor/useDebounced'
import { newFlowText, useFlowDraft } from '../components/flow-editor/useFlowDraft'
import { useLinkedAgents } from '../components/flow-editor/useLinkedAgents'
import { useServerLint } from '../components/flow-editor/useServerLint'
import '../components/flow-editor/flow-editor.css'
import { agentTools } from '../lib/flowSchemaTools'
import { flowSteps } from '../lib/flowSteps'
import { flowText, parseFlow, setToolInputs, toolInputs } from '../lib/flowYaml'
import { localProblems } from '../lib/flowYamlProblems'

const GRAPH_MS = 300

export function FlowEditorPage() {
  const { _splat } = useParams({ from: '/authed/edit/$' })
  const path = _splat ?? ''
  const flow = useFlowDraft(path)
  // Once open, the editor stays: a refetch (after a deploy, say) must not reset it.
  if (flow.text !== null) return <Editor path={path} flow={flow} text={flow.text} />
  if (flow.loadError) return <ErrorBox error={flow.loadError} />
  return <p className="muted">Loading…</p>
}

function Editor({ path, flow, text }: { path: string; flow: ReturnType<typeof useFlowDraft>; text: string }) {
  const client = useQueryClient()
  const navigate = useNavigate()
  const [selected, setSelected] = useState<string | null>(null)
  const [deploying, setDeploying] = useState(false)
  const [copilot, setCopilot] = useState(false)
  const discard = useDiscardDraft(path)

  // The graph and the problems follow the text once typing pauses; the step panel, at once.
  const settled = useDebounced(text, GRAPH_MS)
  const checked = useMemo(() => localProblems(settled), [settled])
  const [lastGood, setLastGood] = useState<unknown>(() => parseFlow(text).value)
  if (checked.value !== null && checked.value !== lastGood) setLastGood(checked.value)
  const now = useMemo(() => parseFlow(text).value, [text])
  const lint = useServerLint(path, settled, checked)
  const problems = useMemo(() => [...checked.problems, ...lint.problems], [checked.problems, lint.problems])

  const steps = useMemo(() => flowSteps(lastGood), [lastGood])
  const { links, agents, errors } = useLinkedAgents(steps, lastGood)
  const graphAgents = useMemo(() => {
    const byStep = new Map<string, GraphAgent>()
    for (const [step, link] of links) {
      const agent = agents.get(link)
      const tools = agentTools(agent?.value).map((t) => ({ name: t.name, requiresApproval: t.requiresApproval }))
      byStep.set(step, { path: link, draft: agent?.draft ?? false, tools })
    }
    return byStep
  }, [links, agents])
  const step = steps.find((s) => s.id === selected) ?? null
  const link = step ? (links.get(step.id) ?? null) : null

  const unlink = useMutation({
    mutationFn: async (stepId: string) => {
      if (!(await flow.flush())) throw new Error('Save the draft first: it has problems.')
      await unwrap(api.POST('/api/agents/unlink-step', { body: { flow: path, step_id: stepId, draft: true, message: '' } }))
      return fetchDraft(path)
    },
    onSuccess: (draft) => {
      client.setQueryData(draftKey(path), draft)
      if (draft) flow.replace(flowText(draft.value), true)
    },
  })

  // An override edited in the panel is written into the YAML (nothing, while it does not parse).
  const onToolInputs = (stepId: string, tool: string, value: Record<string, unknown>) => {
    const next = setToolInputs(text, stepId, tool, value)
    if (next !== null) flow.setText(next)
  }

  const onDiscard = () => {
    if (!window.confirm(`Discard your draft of ${path}? Its changes are lost.`)) return
    discard.mutate(undefined, {
      onSuccess: () => flow.replace(flow.deployed ? flowText(flow.deployed.value) : newFlowText(path), false),
    })
  }
  const hasDraft = flow.status.state !== 'clean' || flow.status.hasDraft

  return (
    <section className="flow-editor">
      <p className="crumbs">
        <Link to="/workspace" search={{}}>
          Workspace
        </Link>
        {flow.deployed && (
          <>
            {' '}
            /{' '}
            <Link to="/workspace/$" params={{ _splat: path }} search={{}}>
              {path}
            </Link>
          </>
        )}
      </p>
      <div className="page-head">
        <h1>
          Edit <span className="mono">{path}</span>
        </h1>
        {flow.isNew && <span className="badge">new flow</span>}
        {hasDraft && <span className="badge status-waiting">Draft</span>}
        {flow.deployed && <span className="badge">deployed v{flow.deployed.version}</span>}
      </div>
      <div className="fe-toolbar">
        <SaveStatus status={flow.status} isNew={flow.isNew} />
        <div className="buttons">
          <button type="button" aria-expanded={copilot} onClick={() => setCopilot((open) => !open)}>
            Copilot
          </button>
          <button type="button" className="primary" onClick={() => setDeploying(true)}>
            Deploy…
          </button>
          <button type="button" className="danger" onClick={onDiscard} disabled={!hasDraft || discard.isPending}>
            Discard draft
          </button>
        </div>
      </div>
      <ErrorBox error={discard.error} title="Not discarded" />
      <div className="fe-body">
        <div className="fe-left">
          <FlowYamlEditor value={text} onChange={flow.setText} problems={problems} label={`Flow ${path} (YAML)`} />
          <ProblemList text={settled} problems={problems} note={lint.note ?? undefined} />
        </div>
        <div className="fe-right">
          <FlowGraph steps={steps} agents={graphAgents} selected={selected} onSelect={setSelected} />
          {step && (
            <StepPanel
              key={step.id}
              step={step}
              link={link}
              agent={link ? agents.get(link) : undefined}
              agentError={link ? errors.get(link) : null}
              flowPath={path}
              toolInputs={(tool) => toolInputs(now ?? lastGood, step.id, tool)}
              onToolInputs={(tool, value) => onToolInputs(step.id, tool, value)}
              onUnlink={() => unlink.mutate(step.id)}
              unlinking={unlink.isPending}
              onClose={() => setSelected(null)}
            />
          )}
          <ErrorBox error={unlink.error} title="Not unlinked" />
        </div>
      </div>
      {copilot && (
        <CopilotPanel
          path={path}
          text={text}
          // Unsaved typing is saved first (the copilot reads the draft); an untouched flow is not.
          prepare={() => (flow.status.state === 'clean' ? Promise.resolve(true) : flow.flush())}
          // The copilot saved (or Reject restored) the draft: the editor shows it as saved.
          onLoad={(value) => flow.replace(value, true)}
          onClose={() => setCopilot(false)}
        />
      )}
      <section className="fe-run" aria-labelledby="fe-run-title">
        <h2 id="fe-run-title">Run the draft</h2>
        <RunDraft
          path={path}
          document={lastGood}
          prepare={flow.flush}
          onStarted={(runId) => void navigate({ to: '/runs/$runId', params: { runId }, search: {} })}
        />
      </section>
      {deploying && (
        <DeployDialog
          path={path}
          prepare={flow.flush}
          onClose={() => setDeploying(false)}
          onDeployed={() => {
            void client.invalidateQueries({ queryKey: ['flow-editor'] })
            void navigate({ to: '/workspace/$', params: { _splat: path }, search: {} })
          }}
        />
      )}
    </section>
  )
}
