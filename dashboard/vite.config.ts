/**
 * Build of the dashboard (docs/dashboard.md). `npm run build:dashboard` writes dist/, which the web
 * app serves at /, /login and /dashboard/*. Development: `npm run dev:dashboard` proxies /api to
 * a platform started with `npm start` (WEB_PORT, default 3000).
 */
import { defineConfig } from 'vite';

const api = `http://127.0.0.1:${process.env.WEB_PORT ?? 3000}`;

export default defineConfig({
  root: import.meta.dirname,
  // JSX with React's automatic runtime through Vite's own transformer (no plugin needed)
  oxc: { jsx: { runtime: 'automatic', importSource: 'react' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // one small entry; pages share components, so splitting would add requests, not save bytes
    chunkSizeWarningLimit: 600,
    reportCompressedSize: false,
  },
  server: { proxy: { '/api': api, '/docs': api } },
});
