/**
 * Prints one plain closing line, `Tests: N passed, N failed, N skipped`, that CI tooling reads
 * in any language (vitest's own summary has a different shape), after the ten slowest files (what
 * to look at first when the run nears its time bound).
 */
import type { Reporter, TestModule } from 'vitest/node';

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>) {
    let passed = 0;
    let failed = unhandledErrors.length;
    let skipped = 0;
    for (const m of testModules) {
      if (m.state() === 'failed' && [...m.children.allTests()].length === 0) failed += 1; // a file that failed to load
      for (const t of m.children.allTests()) {
        const s = t.result().state;
        if (s === 'passed') passed += 1;
        else if (s === 'failed') failed += 1;
        else skipped += 1;
      }
    }
    const slowest = [...testModules]
      .map((m) => ({ file: m.moduleId.replace(`${process.cwd()}/`, ''), ms: m.diagnostic().duration }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 10);
    process.stdout.write(`\nSlowest files:\n${slowest.map((s) => `  ${(s.ms / 1000).toFixed(1).padStart(6)} s  ${s.file}`).join('\n')}\n`);
    process.stdout.write(`\nTests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
