import schema from '../../../schemas/flow.schema.json'
import { flowValidatorCode } from './flowSchemaCodegen'
import validate from './flowSchemaValidate.gen.js'
import generated from './flowSchemaValidate.gen.js?raw'

// Node, untyped here (the UI's types have none): only to rewrite the file when asked.
const node = (globalThis as { process?: { env: Record<string, string | undefined>; cwd(): string } }).process

describe('the generated flow validator', () => {
  it('is the code the schema generates now', async () => {
    const fresh = flowValidatorCode(schema)
    if (node?.env.UPDATE_FLOW_VALIDATOR) {
      const fs = (await import('node:fs' as string)) as { writeFileSync(path: string, text: string): void }
      fs.writeFileSync(`${node.cwd()}/src/lib/flowSchemaValidate.gen.js`, fresh)
      return
    }
    expect(generated === fresh, 'stale: run `UPDATE_FLOW_VALIDATOR=1 npx vitest run src/lib/flowSchemaValidate.test.ts`').toBe(true)
  })

  it('accepts a flow and says what is wrong with another', () => {
    expect(validate({ steps: [{ id: 'a', identity: true }] })).toBe(true)
    expect(validate({ steps: [{ id: 'a', identity: true, bogus: 1 }] })).toBe(false)
    expect(validate.errors).toContainEqual(
      expect.objectContaining({
        instancePath: '/steps/0',
        keyword: 'additionalProperties',
        params: { additionalProperty: 'bogus' },
      }),
    )
  })
})
