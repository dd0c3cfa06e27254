#!/usr/bin/env node
// Runs the checks again over a run's saved history (history.json) and prints the summary: to
// judge an old run by the current checks and verdicts, or to study a violation without
// repeating the run.
//
//   node tests/safety/reanalyze.mjs build/test-output/safety/history.json
//   node tests/safety/reanalyze.mjs --fail-on-starvation HISTORY.json   (check 10 fails the run)
//   node tests/safety/reanalyze.mjs --no-fail-on-starvation HISTORY.json   (check 10 reports only)
// Without either, check 10 fails the run as the run itself was told (its cfg.failOnStarvation;
// absent: fairness.mjs FAIL_ON_STARVATION).
//
// Exit status as the checker's: 0 pass, 1 a violation or a problem the run recorded.

import fs from 'node:fs';

import { analyze } from './analysis.mjs';
import { summaryLines } from './report.mjs';

const args = process.argv.slice(2);
const failOnStarvation = args.includes('--fail-on-starvation');
const reportStarvation = args.includes('--no-fail-on-starvation');
const file = args.find((a) => !a.startsWith('--'));
if (!file) {
  console.error('usage: node tests/safety/reanalyze.mjs [--fail-on-starvation | --no-fail-on-starvation] ' +
    'HISTORY.json');
  process.exit(2);
}
const { register_ops: ops, checks: _old, problems = [], ...h } = JSON.parse(fs.readFileSync(file, 'utf8'));
h.ops = ops;
if (failOnStarvation) h.cfg.failOnStarvation = true;
if (reportStarvation) h.cfg.failOnStarvation = false;
const checks = analyze(h);
const { lines, pass } = summaryLines(h, checks, problems, h.mode);
console.log(lines.join('\n'));
process.exit(pass ? 0 : 1);
