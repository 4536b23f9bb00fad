// Open a Chrome trace-event JSON file in speedscope (a real Trace Event
// Format viewer), headless and offline in Chromium, and print what the
// viewer loaded, read back from the page:
//   node speedscope.mjs TRACE.json
// prints one JSON object: the profile count shown in the toolbar, each
// profile's name and the frames it opened (from the viewer's own Export),
// and every warning or error the page logged.
// Needs playwright-core and speedscope (npm) on NODE_PATH and Chromium;
// scripts/install-peers.sh installs them.
import {createRequire} from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const require = createRequire(import.meta.url);
const {chromium} = require('playwright-core');
const speedscope = path.dirname(require.resolve('speedscope/package.json'));

const trace = process.argv[2];
const browser_bin = process.env.POLYTRACE_CHROMIUM || '/usr/bin/chromium';
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'polytrace-viewer-'));
// speedscope's own way to open a local file: a script that hands it over.
const loader = path.join(tmp, 'load.js');
fs.writeFileSync(
  loader,
  `speedscope.loadFileFromBase64(${JSON.stringify(path.basename(trace))}, ` +
    `${JSON.stringify(fs.readFileSync(trace).toString('base64'))})`,
);
const url =
  'file://' + path.join(speedscope, 'dist/release/index.html') + '#localProfilePath=' + loader;

const logs = [];
const browser = await chromium.launch({
  executablePath: browser_bin,
  headless: true,
  // Offline: nothing may try the network.
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});
let result;
try {
  const page = await browser.newPage({acceptDownloads: true});
  page.on('console', m => {
    if (m.type() === 'warning' || m.type() === 'error') logs.push(`${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', e => logs.push(`pageerror: ${e.message}`));
  page.on('dialog', async d => {
    logs.push(`dialog: ${d.message()}`);
    await d.dismiss();
  });
  await page.goto(url);
  // Loaded: the toolbar names the profile instead of the landing title.
  const exportTab = page.getByText('Export', {exact: false});
  await exportTab.waitFor({timeout: 120000});
  const toolbar = await page.evaluate(() => document.body.innerText.split('\n').slice(0, 12));
  const countText = toolbar.find(l => /\(\d+\/\d+\)/.test(l)) || '';
  const m = countText.match(/\((\d+)\/(\d+)\)/);
  const [download] = await Promise.all([page.waitForEvent('download'), exportTab.click()]);
  const exported = JSON.parse(fs.readFileSync(await download.path(), 'utf8'));
  result = {
    toolbar_profiles: m ? Number(m[2]) : 1,
    toolbar: toolbar,
    exporter: exported.exporter,
    frames: exported.shared.frames.length,
    profiles: exported.profiles.map(p => ({
      name: p.name,
      opens: p.events.filter(e => e.type === 'O').length,
      end: p.endValue,
    })),
    logs,
  };
} finally {
  await browser.close();
  fs.rmSync(tmp, {recursive: true, force: true});
}
process.stdout.write(JSON.stringify(result) + '\n');
