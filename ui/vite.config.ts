/// <reference types="vitest/config" />
import react from '@vitejs/plugin-react'
import { defineConfig } from 'vite'

// The bundle ships inside the Python package; the server serves /assets/* and
// answers other page routes with index.html (adding a CSP nonce to its scripts).
export default defineConfig({
  plugins: [react()],
  base: '/',
  build: {
    outDir: '../src/tidemill/server/_ui_dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    sourcemap: false,
    chunkSizeWarningLimit: 1200,
  },
  server: {
    // `npm run dev` against a local `tidemill server` on :8000.
    proxy: { '/api': 'http://127.0.0.1:8000' },
  },
  test: {
    environment: 'jsdom',
    globals: true,
    setupFiles: ['./src/test-setup.ts'],
    include: ['src/**/*.test.{ts,tsx}'],
    css: false,
    // jsdom is the slow part: set it up once per worker, not once per file (tests clean up after themselves).
    isolate: false,
  },
})
