// The test matrix filters: text, "only problems" and one outcome. No library, no network.
// The filters can be given in the address (#q=mlp&only=1&outcome=failed): a link to a view.
(function () {
  var q = document.getElementById('filter');
  var only = document.getElementById('only-problems');
  var outcome = document.getElementById('outcome');
  var counter = document.getElementById('shown');
  if (!q || !only || !outcome || !counter) { return; }
  var rows = Array.prototype.slice.call(document.querySelectorAll('#matrix tbody tr'));
  // the outcomes that make a row a problem, said once by the table (a row's own say its outcomes)
  var bad = (document.getElementById('matrix').getAttribute('data-bad') || '').split(' ');
  function has(tr, tag) { return (' ' + tr.getAttribute('data-outcomes') + ' ').indexOf(' ' + tag + ' ') !== -1; }
  function problem(tr) { return bad.some(function (tag) { return tag && has(tr, tag); }); }
  function apply() {
    var text = (q.value || '').toLowerCase(), want = outcome.value, shown = 0;
    rows.forEach(function (tr) {
      var ok = tr.getAttribute('data-id').indexOf(text) !== -1 &&
               (!only.checked || problem(tr)) &&
               (!want || has(tr, want));
      tr.hidden = !ok;
      if (ok) { shown++; }
    });
    counter.textContent = String(shown);
  }
  function fromAddress() {
    var params = new URLSearchParams(window.location.hash.slice(1));
    if (params.has('q')) { q.value = params.get('q'); }
    if (params.has('only')) { only.checked = params.get('only') === '1'; }
    if (params.has('outcome')) { outcome.value = params.get('outcome'); }
    apply();
  }
  q.addEventListener('input', apply);
  only.addEventListener('change', apply);
  outcome.addEventListener('change', apply);
  window.addEventListener('hashchange', fromAddress);
  // #32: an address without a filter (and a form the browser did not refill) shows every
  // row as written: the page opens without visiting each of them
  var given = new URLSearchParams(window.location.hash.slice(1));
  if (given.has('q') || given.has('only') || given.has('outcome') || q.value || only.checked || outcome.value) {
    fromAddress();
  } else {
    counter.textContent = String(rows.length);
  }
})();
