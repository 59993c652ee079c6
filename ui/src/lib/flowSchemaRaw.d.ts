/** `?raw` imports (Vite's): the file's text; the flow validator's test compares it with fresh code. */
declare module '*.gen.js?raw' {
  const text: string
  export default text
}
