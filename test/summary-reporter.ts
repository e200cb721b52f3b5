/**
 * Prints one plain closing line, `Tests: N passed, N failed, N skipped`, that CI tooling reads
 * in any language (vitest's own summary has a different shape).
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
    process.stdout.write(`\nTests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
