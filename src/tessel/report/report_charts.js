(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('tessel-data').textContent);
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;
  Chart.defaults.plugins.legend.position = 'bottom';
  const palette = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2',
                   '#17becf'];
  const color = i => palette[i % palette.length];
  // Dataset 0 is drawn on top: later runs get wider lines, so runs with
  // identical curves (any layout trains like one process) stay visible.
  const width = i => 1.5 + 2 * i;
  const grid = document.getElementById('charts');
  const charts = [];
  const runs = data.runs;

  function card(id, title, note) {
    const div = document.createElement('div');
    div.className = 'card';
    const h = document.createElement('h2');
    h.textContent = title;
    div.appendChild(h);
    if (note) {
      const p = document.createElement('p');
      p.textContent = note;
      div.appendChild(p);
    }
    const plot = document.createElement('div');
    plot.className = 'plot';
    const canvas = document.createElement('canvas');
    canvas.id = id;
    plot.appendChild(canvas);
    div.appendChild(plot);
    grid.appendChild(div);
    return canvas;
  }
  function draw(id, title, note, config) {
    charts.push(new Chart(card(id, title, note), config));
  }
  const xy = s => s.map(p => ({x: p[0], y: p[1]}));
  const axis = (text, extra) => Object.assign({title: {display: true, text: text}}, extra || {});

  // One line per run for a per-step series; nothing when no run has it.
  function stepChart(id, title, note, key, yTitle) {
    const datasets = runs.filter(r => r.series[key].length).map(r => ({
      label: r.name, data: xy(r.series[key]), borderColor: color(runs.indexOf(r)),
      backgroundColor: color(runs.indexOf(r)), borderWidth: width(runs.indexOf(r)), pointRadius: 0}));
    if (!datasets.length) return;
    draw(id, title, note, {type: 'line', data: {datasets: datasets}, options: {
      interaction: {mode: 'nearest', intersect: false},
      scales: {x: axis('step', {type: 'linear', ticks: {precision: 0}}), y: axis(yTitle)}}});
  }

  // Loss: training loss (solid), validation loss (dashed, points), baselines.
  {
    const datasets = [];
    let lo = Infinity, hi = -Infinity;
    runs.forEach((r, i) => {
      r.series.loss.concat(r.series.val_loss).forEach(p => {
        lo = Math.min(lo, p[0]);
        hi = Math.max(hi, p[0]);
      });
      if (r.series.loss.length)
        datasets.push({label: r.name + ' loss', data: xy(r.series.loss), borderColor: color(i),
                       backgroundColor: color(i), borderWidth: width(i), pointRadius: 0});
      if (r.series.val_loss.length)
        datasets.push({label: r.name + ' val loss', data: xy(r.series.val_loss),
                       borderColor: color(i), backgroundColor: color(i), borderDash: [6, 4],
                       borderWidth: width(i), pointRadius: 3 + 2 * i});
    });
    const seen = new Set();
    runs.forEach(r => {
      if (r.baseline === null || !isFinite(lo) || seen.has(r.baseline)) return;
      seen.add(r.baseline);
      datasets.push({label: 'baseline ' + r.baseline.toFixed(4) + ' (' + r.name + ')',
                     data: [{x: lo, y: r.baseline}, {x: hi, y: r.baseline}], borderColor: '#777',
                     backgroundColor: '#777', borderDash: [2, 3], borderWidth: 1.5, pointRadius: 0});
    });
    if (datasets.length)
      draw('chart-loss', 'Loss', 'nats per token; dashed with points: validation loss; ' +
           'grey dotted: the baseline to beat (unigram entropy of the text, or chance)',
           {type: 'line', data: {datasets: datasets}, options: {
             interaction: {mode: 'nearest', intersect: false},
             scales: {x: axis('step', {type: 'linear', ticks: {precision: 0}}), y: axis('loss (nats)')}}});
  }
  stepChart('chart-lr', 'Learning rate', '', 'lr', 'learning rate');
  stepChart('chart-grad-norm', 'Gradient norm', 'global norm before clipping', 'grad_norm',
            'gradient norm');
  stepChart('chart-step-ms', 'Step time', 'wall time of each training step on rank 0',
            'step_ms', 'ms per step');
  stepChart('chart-tokens', 'Throughput', 'items (tokens or images) per second', 'tokens_per_s',
            'per second');

  // Bytes each mesh axis carried per step.
  {
    const datasets = [];
    runs.forEach((r, i) => Object.keys(r.comm).forEach((a, j) => datasets.push({
      label: r.name + ': ' + a, data: r.comm[a].map(p => ({x: p[0], y: p[1] / 1048576})),
      borderColor: color(i), backgroundColor: color(i), borderDash: j ? [4 * j, 3] : [],
      borderWidth: width(i), pointRadius: 0})));
    if (datasets.length)
      draw('chart-comm', 'Bytes per mesh axis per step',
           'collective payload bytes on rank 0 per training step, all kinds summed',
           {type: 'line', data: {datasets: datasets}, options: {
             scales: {x: axis('step', {type: 'linear', ticks: {precision: 0}}), y: axis('MiB per step', {beginAtZero: true})}}});
  }

  // Per-rank bar charts: one group per (run, rank).
  function rankBars(id, title, note, key, fields, yTitle, scale) {
    const labels = [], values = fields.map(() => []);
    runs.forEach(r => r[key].forEach(row => {
      labels.push(r.name + ' r' + row.rank);
      fields.forEach((f, k) => values[k].push(row[f[0]] === null ? null : row[f[0]] * scale));
    }));
    if (!labels.length) return;
    const shades = ['#4e79a7', '#f28e2b', '#59a14f'];
    draw(id, title, note, {type: 'bar', data: {labels: labels, datasets: fields.map((f, k) => ({
      label: f[1], data: values[k], backgroundColor: shades[k]}))},
      options: {scales: {y: axis(yTitle, {beginAtZero: true})}}});
  }
  rankBars('chart-memory', 'Memory per rank',
           'tensor storage predicted by the static plan vs the measured peak; peak RSS adds code, ' +
           'libraries, data and MPI', 'memory',
           [['predicted', 'predicted'], ['measured', 'measured peak'], ['rss', 'peak RSS']],
           'MiB', 1 / 1048576);
  rankBars('chart-bubble', 'Pipeline bubble per rank',
           'idle fraction of the step, measured over the run vs the schedule with F=B=1', 'bubble',
           [['measured', 'measured'], ['schedule', 'schedule']], 'fraction idle', 1);

  // One step of each traced run: a bar per action, one row per rank.
  const kinds = {F: '#4e79a7', B: '#f28e2b', BI: '#e15759', BW: '#b07aa1', send_act: '#76b7b2',
                 recv_act: '#17becf', send_grad: '#9c755f', recv_grad: '#ff9da7', step: '#59a14f'};
  runs.forEach((r, i) => {
    if (!r.timeline) return;
    const ranks = r.timeline.ranks, byKind = {};
    r.timeline.events.forEach(e => {
      const kind = e.name.split(' ')[0];
      (byKind[kind] = byKind[kind] || []).push({x: [e.start_ms, e.end_ms], y: ranks[e.rank],
                                                name: e.name});
    });
    const datasets = Object.keys(byKind).map(k => ({label: k, data: byKind[k],
      backgroundColor: kinds[k] || color(i), grouped: false, barPercentage: 0.9,
      categoryPercentage: 1}));
    draw('chart-timeline-' + i, 'One step of ' + r.name,
         'the last step of the trace; F forward, B backward (BI input, BW weight), transfers, ' +
         'optimizer step', {type: 'bar', data: {labels: ranks, datasets: datasets}, options: {
           indexAxis: 'y',
           plugins: {tooltip: {callbacks: {label: c => c.raw.name + ': ' +
             (c.raw.x[1] - c.raw.x[0]).toFixed(2) + ' ms'}}},
           scales: {x: axis('ms from the step start', {type: 'linear', min: 0}),
                    y: {type: 'category', labels: ranks}}}});
  });

  // The planner's validation: predicted vs measured step time.
  if (data.plan_validation.length) {
    const pts = data.plan_validation.map(p => ({x: p.predicted_ms, y: p.measured_ms,
                                               label: p.label}));
    const all = pts.flatMap(p => [p.x, p.y]);
    const lo = Math.min(...all), hi = Math.max(...all);
    draw('chart-plan', 'Planner: predicted vs measured step time',
         'one point per plan; on the grey line the prediction is exact',
         {type: 'scatter', data: {datasets: [
           {label: 'plans', data: pts, backgroundColor: '#d62728', pointRadius: 4},
           {type: 'line', label: 'identity', data: [{x: lo, y: lo}, {x: hi, y: hi}],
            borderColor: '#777', borderDash: [4, 4], pointRadius: 0}]},
          options: {plugins: {tooltip: {callbacks: {label: c => (c.raw.label || '') + ' (' +
            c.raw.x.toFixed(1) + ', ' + c.raw.y.toFixed(1) + ') ms'}}},
            scales: {x: axis('predicted ms per step', {type: 'linear'}),
                     y: axis('measured ms per step', {type: 'linear'})}}});
  }

  // Self-check for the browser test: every canvas must show drawn and coloured pixels.
  const check = {charts: charts.map(c => {
    const canvas = c.canvas;
    const px = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    let drawn = 0, coloured = 0;
    for (let k = 0; k < px.length; k += 4) {
      if (px[k + 3] === 0) continue;
      ++drawn;
      if (Math.max(px[k], px[k + 1], px[k + 2]) - Math.min(px[k], px[k + 1], px[k + 2]) > 60)
        ++coloured;
    }
    return {id: canvas.id, drawn: drawn, coloured: coloured};
  })};
  check.errors = window.tesselErrors;
  document.getElementById('tessel-selfcheck').textContent = JSON.stringify(check);
})();
