/**
 * Agent replies as markdown, safely (dashboard/src/markdown.ts): markdown becomes
 * elements, HTML written in a reply stays text, and no link leads anywhere but http(s) or mailto.
 */
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import { MarkdownText, safeUrl } from '../../dashboard/src/markdown.ts';

const render = (text: string, codeAction?: (code: string) => string) =>
  renderToStaticMarkup(createElement(MarkdownText, { text, codeAction }));

describe('chat markdown', () => {
  it('renders emphasis, headings, lists, inline code and tables', () => {
    expect(render('**bold** and *it*')).toContain('<strong>bold</strong> and <em>it</em>');
    expect(render('# Title')).toContain('<h1>Title</h1>');
    expect(render('- one\n- two')).toMatch(/<ul>\s*<li>one<\/li>\s*<li>two<\/li>\s*<\/ul>/);
    expect(render('use `npm ci`')).toContain('<code>npm ci</code>');
    const table = render('| a | b |\n| - | - |\n| 1 | 2 |');
    expect(table).toContain('<div class="md-table"><table>');
    expect(table).toMatch(/<th>a<\/th>/);
    expect(table).toMatch(/<td>2<\/td>/);
  });

  it('puts a fenced code block in a scrolling block with its source handed to the action', () => {
    const html = render('```ts\nconst a = 1 < 2;\n```', (code) => `copy:${code}`);
    expect(html).toContain('<div class="md-code"><pre><code class="language-ts">const a = 1 &lt; 2;\n</code></pre>');
    expect(html).toContain('<div class="md-code-actions">copy:const a = 1 &lt; 2;</div>');
  });

  it('shows HTML in a reply as text: no img, no script, no event handler attribute', () => {
    const img = render('look <img src=x onerror=alert(1)> here');
    expect(img).not.toMatch(/<img/i);
    expect(img).toContain('&lt;img src=x onerror=alert(1)&gt;');
    const script = render('<script>alert(1)</script>\n\nafter');
    expect(script).not.toMatch(/<script/i);
    expect(script).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    // a markdown image does not load either: it becomes a link to a safe address only
    const mdImg = render('![pic](javascript:alert(1))');
    expect(mdImg).not.toMatch(/<img|javascript:/i);
  });

  it('keeps only http(s) and mailto links, opened without opener or referrer', () => {
    for (const bad of ['[x](javascript:alert(1))', '[x](JavaScript:alert(1))', '[x](data:text/html,hi)', '<javascript:alert(1)>']) {
      const html = render(bad);
      expect(html, bad).not.toMatch(/href="[^"]*(javascript|data):/i);
    }
    expect(render('[x](javascript:alert(1))')).toContain('<span>x</span>');
    expect(render('[docs](https://example.org/a?b=1)')).toContain(
      '<a href="https://example.org/a?b=1" target="_blank" rel="noopener noreferrer">docs</a>',
    );
    expect(render('[me](mailto:a@b.c)')).toContain('href="mailto:a@b.c"');
    expect(safeUrl('/dashboard/admin')).toBe('');
    expect(safeUrl(' http://x.y ')).toBe('http://x.y');
  });
});
