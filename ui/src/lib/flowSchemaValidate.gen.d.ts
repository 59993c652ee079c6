/** The generated validator of schemas/flow.schema.json (see flowSchemaCodegen.ts). */
import type { ErrorObject } from 'ajv'

export interface FlowValidator {
  (data: unknown): boolean
  errors?: ErrorObject[] | null
}
export declare const validate: FlowValidator
export default validate
