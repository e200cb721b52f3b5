/**
 * Agent replies as markdown, safely. react-markdown builds React elements from the
 * markdown syntax tree — no innerHTML anywhere — and, without rehype-raw, HTML written in a reply
 * stays text: `<img src=x onerror=…>` shows as those characters. Links keep only http(s) and mailto
 * targets and open in a new tab without an opener or referrer; images are shown as links (the
 * dashboard's Content-Security-Policy, img-src 'self', would block a remote image anyway).
 *
 * Plain .ts with createElement (no JSX) so the server-side test renders it under the root tsconfig.
 */
import { createElement, memo, type ReactNode } from 'react';
import Markdown, { type Components } from 'react-markdown';
import remarkGfm from 'remark-gfm';

const SAFE_URL = /^(https?:|mailto:)/i;

/** The link target to keep: http(s) and mailto only; anything else (javascript:, data:, relative) becomes ''. */
export function safeUrl(url: string): string {
  const u = url.trim();
  return SAFE_URL.test(u) ? u : '';
}

type HastLike = { type: string; value?: string; children?: HastLike[] };
/** The text of a syntax-tree node (a code block's source, for its Copy button). */
function textOf(node: HastLike | undefined): string {
  if (!node) return '';
  if (node.type === 'text') return node.value ?? '';
  return (node.children ?? []).map(textOf).join('');
}

function link(href: string, children: ReactNode) {
  return href
    ? createElement('a', { href, target: '_blank', rel: 'noopener noreferrer' }, children)
    : createElement('span', null, children);
}

function components(codeAction?: (code: string) => ReactNode): Components {
  return {
    a: ({ href, children }) => link(safeUrl(href ?? ''), children),
    img: ({ src, alt }) => link(safeUrl(typeof src === 'string' ? src : ''), alt || 'image'),
    // a code block scrolls inside itself, so a long line never widens the chat
    pre: ({ node, children }) =>
      createElement(
        'div',
        { className: 'md-code' },
        createElement('pre', null, children),
        codeAction ? createElement('div', { className: 'md-code-actions' }, codeAction(textOf(node as HastLike).replace(/\n$/, ''))) : null,
      ),
    table: ({ children }) => createElement('div', { className: 'md-table' }, createElement('table', null, children)),
  };
}

const PLUGINS = [remarkGfm];

/**
 * One reply rendered. Memoised on its text: while a reply streams in, only that message re-renders
 * (React reconciles the new tree onto the old one, so the growing message does not flicker).
 */
export const MarkdownText = memo(function MarkdownText(props: { text: string; codeAction?: (code: string) => ReactNode }) {
  return createElement(
    'div',
    { className: 'md' },
    createElement(Markdown, { remarkPlugins: PLUGINS, urlTransform: safeUrl, components: components(props.codeAction) }, props.text),
  );
});
