// Parses every ```mermaid block of the Markdown files named, with the mermaid package under jsdom,
// and checks that a broken block is refused. Not part of the test command (it needs npm):
// modules are found beside the script, so copy it next to them:
//   npm install --prefix /tmp/mmd mermaid@10 jsdom@22 && cp scripts/lib/check_mermaid.mjs /tmp/mmd/
//   node /tmp/mmd/check_mermaid.mjs README.md README.zh-CN.md docs/*.md
import { JSDOM } from 'jsdom';
import fs from 'fs';
const dom = new JSDOM('<!DOCTYPE html><body></body>', { pretendToBeVisual: true });
global.window = dom.window; global.document = dom.window.document;
global.DOMPurify = undefined;
for (const k of ['navigator','Element','HTMLElement','SVGElement','Node']) { try { if (!(k in global)) global[k] = dom.window[k]; } catch {} }
const { default: mermaid } = await import('mermaid');
mermaid.initialize({ startOnLoad: false });
let failed = 0;
for (const file of process.argv.slice(2)) {
  const text = fs.readFileSync(file, 'utf8');
  const blocks = [...text.matchAll(/```mermaid\n([\s\S]*?)```/g)].map(m => m[1]);
  for (const [i, b] of blocks.entries()) {
    try { await mermaid.parse(b); console.log(`ok   ${file} block ${i + 1}`); }
    catch (e) { failed++; console.log(`FAIL ${file} block ${i + 1}: ${e.message || e}`); }
  }
}
// A deliberately broken block must fail, or the check proves nothing.
try { await mermaid.parse('flowchart LR\n A -->'); console.log('BROKEN BLOCK PASSED: the parser checks nothing'); failed++; }
catch { console.log('ok   a broken block is refused'); }
process.exit(failed ? 1 : 0);
