// browser.mjs: lathe's web console in headless Chromium (playwright-core),
// run by browser.sh against a server with a running workload. Every wait is
// for a condition on the page (a selector, a text), never a fixed sleep.
// Fails on any error in the browser's console or the page, on a request
// carrying a token in its URL, and on a step whose condition never comes.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";

const URL_ = process.env.UI_URL;
const ADMIN = process.env.UI_ADMIN;
const RESEARCH = process.env.UI_RESEARCH;
const SHOTS = process.env.UI_SHOTS;
const WAIT = 30000;
mkdirSync(SHOTS, { recursive: true });

const problems = [];
let expectErrors = false; // the one step that provokes a 401 on purpose
let step = "start";

function fail(msg) {
  throw new Error(step + ": " + msg);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--disable-gpu", "--disable-dev-shm-usage"],
});
const t0 = Date.now();
try {
  const context = await browser.newContext({ viewport: { width: 1440, height: 950 }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT);
  page.on("console", (m) => {
    if (m.type() === "error" && !expectErrors) problems.push(step + ": console error: " + m.text());
  });
  page.on("pageerror", (e) => problems.push(step + ": page error: " + e.message));
  page.on("requestfailed", (r) => {
    const why = r.failure() ? r.failure().errorText : "";
    if (!why.includes("ERR_ABORTED")) problems.push(step + ": request failed: " + r.url() + " " + why);
  });
  page.on("request", (r) => {
    for (const t of [ADMIN, RESEARCH]) if (r.url().includes(t)) problems.push(step + ": a token in a URL: " + r.url());
  });
  const shot = async (name) => {
    await page.screenshot({ path: SHOTS + "/" + name + ".png", fullPage: true });
    console.log("screenshot " + SHOTS + "/" + name + ".png");
  };
  const textOf = async (sel) => (await page.locator(sel).first().innerText()).trim();

  // ---- sign in ----
  step = "sign in";
  const res = await page.goto(URL_ + "/");
  const csp = res.headers()["content-security-policy"] || "";
  if (!csp.includes("script-src 'self'") || !csp.includes("frame-ancestors 'none'")) fail("no CSP on the page: " + csp);
  await page.waitForSelector("form.login #token");
  await shot("login");
  expectErrors = true; // the browser logs the 401 of a wrong token
  await page.fill("#token", "not-a-token");
  await page.click("form.login button[type=submit]");
  await page.waitForSelector(".login-error:has-text('not known')");
  expectErrors = false;
  await page.fill("#token", ADMIN);
  await page.click("form.login button[type=submit]");
  await page.waitForSelector("#nav-gpus.active");
  if ((await page.evaluate(() => document.cookie)) !== "") fail("the console set a cookie");
  if (!(await page.evaluate((t) => sessionStorage.getItem("lathe.token") === t, ADMIN))) fail("the token is not in sessionStorage");
  if (page.url().includes(ADMIN)) fail("the token is in the address");

  // ---- the GPU map ----
  step = "GPU map";
  await page.waitForSelector("section.node[data-node='a100-1'] .gpu.busy");
  await page.waitForFunction(() => document.querySelectorAll(".gpu.busy").length >= 7);
  await page.waitForSelector("section.node[data-node='l40s-1'] .gpu.shared .part-job:has-text('shared-embed')");
  await page.waitForSelector(".gpu.frag");                       // big-eval cannot use a100-1's free GPUs
  await page.waitForSelector(".gpu .sample-text:has-text('94%')"); // NVML's figures of the H100
  await page.waitForSelector("section.node[data-node='a100-1'] .nvgroup-label:has-text('NVLink 1')");
  const parts = await page.locator(".gpu.shared").first().locator(".part:not(.rest)").count();
  if (parts !== 2) fail("the shared L40S shows " + parts + " jobs, not shared-eval and shared-embed");
  const hotfix = await page.locator("a.part:has-text('hotfix')").count();
  if (hotfix !== 2) fail("hotfix should cover 2 GPUs, found " + hotfix);
  await shot("gpus");

  // ---- the queue ----
  step = "queue";
  await page.click("#nav-queue");
  await page.waitForSelector("#queue tr.job-row a:has-text('big-eval')");
  await page.waitForSelector("#queue tr.job-row:has(a:has-text('ctx-32k')) .reason:has-text('quota')");
  await page.waitForSelector("#queue tr.job-row:has(a:has-text('nightly-eval')) .reason:has-text('budget')");
  await shot("queue");

  // ---- jobs ----
  step = "jobs";
  await page.click("#nav-jobs");
  await page.click(".chips button:has-text('All')");
  await page.waitForFunction(() => document.querySelectorAll("#jobs tbody tr").length >= 11);
  await shot("jobs");

  // ---- the experiment ----
  step = "experiment";
  await page.click("#nav-experiments");
  await page.click("a.exp-link:has-text('rank-sweep')");
  await page.waitForFunction(() => document.querySelectorAll("#exp-jobs tbody tr").length === 3);
  await page.waitForSelector(".card .chart canvas");
  await page.waitForSelector("#exp-jobs .best-badge");           // evaluated every 10 steps
  const best = await textOf("#exp-jobs tr.best a.job-link");
  if (!best.endsWith("r32")) fail("the best job should be r32 (it learns fastest), not " + best);
  await page.waitForFunction(() => [...document.querySelectorAll(".u-legend .u-label")].length >= 6);
  await shot("experiment");

  // ---- teams ----
  step = "teams";
  await page.click("#nav-teams");
  await page.waitForSelector(".team-card[data-team='research'] .chart canvas");
  await page.waitForSelector(".team-card[data-team='product'] .badge:has-text('budget')");
  await page.waitForSelector("#banner .alert:has-text('product')"); // product spent its budget
  await shot("teams");

  // ---- a job, and Cancel ----
  step = "job";
  await page.click("#nav-experiments");
  await page.click("a.exp-link:has-text('rank-sweep')");
  await page.click("#exp-jobs a.job-link:has-text('r16')");
  await page.waitForSelector(".job-head h1:has-text('r16') .badge:has-text('running')");
  await page.waitForSelector(".charts .chart canvas");
  await page.waitForFunction(() => document.querySelectorAll("#events .event").length >= 3);
  await page.waitForFunction(() => /\[lathe-train\] step=\d+/.test(document.querySelector("#log").textContent));
  await page.waitForSelector(".membar .seg");
  // no ETA from this trainer: the console's own, at the recent pace
  await page.waitForSelector(".stat:has(.stat-label:has-text('time left')) .stat-value:has-text('~')");
  const before = Number((await textOf(".stat .stat-value")).split(" ")[0]);
  await page.waitForFunction((b) => Number(document.querySelector(".stat .stat-value").textContent.split(" ")[0]) > b, before);
  await shot("job");
  await page.click("#cancel");
  await page.waitForSelector(".modal button.danger");
  await page.click(".modal button.danger");
  await page.waitForSelector(".job-head .badge:has-text('cancelled')");
  await page.waitForSelector("#events .ev-type:has-text('cancelled')");
  if (await page.locator("#cancel").count()) fail("a cancelled job still offers Cancel");
  await shot("job-cancelled");

  // ---- the job on an NVML GPU: its GPU history beside the plan ----
  step = "job on an H100";
  await page.goto(URL_ + "/#/jobs/research/h100-probe");
  await page.waitForSelector(".chart .chart-title:has-text('GPU (NVML)')");
  await page.waitForSelector(".stat .stat-label:has-text('GPU use')");
  await page.waitForFunction(() => document.querySelectorAll(".chart canvas").length >= 3);
  await shot("job-gpu");

  // ---- a team's token: its own jobs only ----
  step = "team token";
  await page.click("#sign-out");
  await page.waitForSelector("form.login #token");
  await page.fill("#token", RESEARCH);
  await page.click("form.login button[type=submit]");
  await page.waitForSelector("header.top .who:has-text('team research')");
  await page.click("#nav-gpus");
  await page.waitForSelector(".gpu .part:has-text('another team')");  // product's jobs, unnamed
  if (await page.locator("a.part:has-text('hotfix')").count()) fail("team research sees product's job hotfix");
  await page.click("#nav-jobs");
  await page.click(".chips button:has-text('All')");
  await page.waitForFunction(() => document.querySelectorAll("#jobs tbody tr").length >= 5);
  const teams = await page.locator("#jobs tbody .team").allInnerTexts();
  if (teams.some((t) => t.trim() !== "research")) fail("team research sees other teams' jobs: " + teams.join(", "));
  await shot("team-jobs");
} catch (e) {
  problems.push(e.message);
} finally {
  await browser.close();
}
const secs = ((Date.now() - t0) / 1000).toFixed(1);
if (problems.length) {
  console.log("FAIL (" + secs + " s):\n  " + problems.join("\n  "));
  process.exit(1);
}
console.log("ok: the console's pages, live, in Chromium (" + secs + " s)");
