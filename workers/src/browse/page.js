// trawl page helpers: evaluated once per document by the browse pool (possibly again: the
// install is idempotent), then called as `window.__trawl.<fn>(...)` through CDP
// Runtime.evaluate with returnByValue. Every function is synchronous, returns a plain
// JSON-serialisable value and never throws: failures come back as `{error: "..."}`.
// The page's DOM is left alone except by highlight()/grid() (one overlay container,
// `#__trawl_overlay`, removed by clear()) and by fill()/select(), which change the control.
(function () {
  'use strict';
  var VERSION = 2;
  if (window.__trawl && window.__trawl.version === VERSION) return;

  var OVERLAY_ID = '__trawl_overlay';
  var NAME_CAP = 80;
  var VALUE_CAP = 200;
  var PASSWORD_MASK = '\u2022\u2022\u2022\u2022';
  var ACTION_ROLES = {
    button: 1, link: 1, checkbox: 1, radio: 1, tab: 1, menuitem: 1, menuitemcheckbox: 1,
    menuitemradio: 1, option: 1, switch: 1, textbox: 1, combobox: 1, searchbox: 1,
    slider: 1, spinbutton: 1, treeitem: 1, listbox: 1
  };
  var SKIP_TAGS = { SCRIPT: 1, STYLE: 1, NOSCRIPT: 1, TEMPLATE: 1, HEAD: 1, META: 1, LINK: 1, TITLE: 1 };
  var NOT_FILLABLE_TYPES = {
    checkbox: 1, radio: 1, submit: 1, button: 1, reset: 1, image: 1, file: 1, hidden: 1
  };
  var TEXTLIKE_TYPES = {
    text: 1, email: 1, search: 1, tel: 1, url: 1, password: 1, number: 1, date: 1,
    'datetime-local': 1, month: 1, week: 1, time: 1, color: 1, range: 1
  };

  // ---------------------------------------------------------------- small helpers

  function errMsg(e) {
    try { return String((e && e.message) || e); } catch (_) { return 'unknown error'; }
  }

  function guard(fn) {
    return function () {
      try { return fn.apply(null, arguments); } catch (e) { return { error: errMsg(e) }; }
    };
  }

  function collapse(s) {
    return String(s == null ? '' : s).replace(/\s+/g, ' ').trim();
  }

  function cap(s, n) {
    s = collapse(s);
    return s.length > n ? s.slice(0, n - 1) + '\u2026' : s;
  }

  function lc(el) { return (el.localName || el.nodeName || '').toLowerCase(); }

  // Upper-case tag name, also in XHTML documents (where tagName is lower case).
  function TAG(el) { return el && el.localName ? el.localName.toUpperCase() : ''; }

  function isEl(n) { return !!n && n.nodeType === 1; }

  // The parent in the flat (composed) tree: slot, then parent element, then shadow host.
  function composedParent(n) {
    if (n.assignedSlot) return n.assignedSlot;
    if (n.parentElement) return n.parentElement;
    var p = n.parentNode;
    if (p && p.nodeType === 11 && p.host) return p.host;
    return null;
  }

  function composedContains(anc, n) {
    while (n) {
      if (n === anc) return true;
      n = composedParent(n);
    }
    return false;
  }

  function overlayEl() { return document.getElementById(OVERLAY_ID); }

  // Depth-first walk over elements in document order, entering open shadow roots (the
  // shadow tree before the host's light children). cb returns false to skip a subtree.
  function walk(root, cb) {
    var stack = [root];
    while (stack.length) {
      var n = stack.pop();
      if (n !== root && isEl(n)) {
        if (SKIP_TAGS[TAG(n)] || n.id === OVERLAY_ID) continue;
        if (cb(n) === false) continue;
      }
      var kids = n.children || [];
      for (var k = kids.length - 1; k >= 0; k--) stack.push(kids[k]);
      if (isEl(n) && n.shadowRoot) {
        var sk = n.shadowRoot.children;
        for (var j = sk.length - 1; j >= 0; j--) stack.push(sk[j]);
      }
    }
  }

  function allShadowRoots() {
    var out = [];
    walk(document.documentElement, function (el) { if (el.shadowRoot) out.push(el.shadowRoot); });
    return out;
  }

  function describe(el) {
    if (!isEl(el)) return String(el);
    var s = lc(el);
    if (el.id) s += '#' + el.id;
    var c = typeof el.className === 'string' ? collapse(el.className) : '';
    if (c) s += '.' + c.split(' ').slice(0, 3).join('.');
    return s;
  }

  function visible(el) {
    try {
      if (el.checkVisibility && !el.checkVisibility({ checkOpacity: false, checkVisibilityCSS: true })) return false;
      var r = el.getBoundingClientRect();
      if (!(r.width > 0 && r.height > 0)) return false;
      if (!el.checkVisibility) {
        var cs = getComputedStyle(el);
        if (cs.visibility === 'hidden' || cs.display === 'none') return false;
      }
      return true;
    } catch (_) { return false; }
  }

  // aria-hidden="true" or inert on the element or any composed ancestor.
  function hiddenFromUsers(el) {
    for (var n = el; n; n = composedParent(n)) {
      if (n.nodeType !== 1) continue;
      if (n.getAttribute('aria-hidden') === 'true') return true;
      if (n.hasAttribute('inert')) return true;
    }
    return false;
  }

  function rectOf(el) {
    var r = el.getBoundingClientRect();
    return { x: Math.round(r.left), y: Math.round(r.top), w: Math.round(r.width), h: Math.round(r.height) };
  }

  function inViewport(r) {
    var vw = window.innerWidth, vh = window.innerHeight;
    return r.x + r.w > 0 && r.y + r.h > 0 && r.x < vw && r.y < vh;
  }

  // ---------------------------------------------------------------- roles and names

  function inputType(el) { return (el.getAttribute('type') || 'text').toLowerCase(); }

  function isFormField(el) {
    var t = TAG(el);
    return t === 'INPUT' || t === 'SELECT' || t === 'TEXTAREA';
  }

  function editableRoot(el) {
    if (!el.hasAttribute('contenteditable')) return false;
    var v = (el.getAttribute('contenteditable') || '').toLowerCase();
    if (v === 'false') return false;
    var p = composedParent(el);
    return !(p && p.isContentEditable);
  }

  // 'strong': semantically actionable; 'weak': only onclick/tabindex/cursor; '' otherwise.
  function actionKind(el, pointerCache) {
    var t = TAG(el);
    if (t === 'HTML' || t === 'BODY') return '';
    if ((t === 'A' || t === 'AREA') && el.hasAttribute('href')) return 'strong';
    if (lc(el) === 'a' && (el.hasAttribute('href') || el.hasAttribute('xlink:href'))) return 'strong';
    if (t === 'BUTTON' || t === 'SELECT' || t === 'TEXTAREA') return 'strong';
    if (t === 'INPUT') return inputType(el) === 'hidden' ? '' : 'strong';
    if (t === 'SUMMARY') return 'strong';
    var role = (el.getAttribute('role') || '').trim().split(/\s+/)[0].toLowerCase();
    if (role && ACTION_ROLES[role]) return 'strong';
    if (editableRoot(el)) return 'strong';
    if (t === 'LABEL') {
      // A label whose control is visually hidden (custom checkbox styling) stands in for it.
      var c = el.control;
      if (c && !visible(c)) return 'strong';
      if (c) return '';
    }
    if (el.hasAttribute('onclick')) return 'weak';
    var ti = el.getAttribute('tabindex');
    if (ti !== null && ti !== '' && parseInt(ti, 10) >= 0) return 'weak';
    if (pointerCache) {
      try {
        var cur = getComputedStyle(el).cursor;
        if (cur === 'pointer') {
          var p = composedParent(el);
          var pc = p && isEl(p) ? getComputedStyle(p).cursor : '';
          if (pc !== 'pointer') return 'pointer';
        }
      } catch (_) {}
    }
    return '';
  }

  // The element whose state a listed element shows (a label standing in for its control).
  function stateEl(el) {
    if (TAG(el) === 'LABEL' && el.control) return el.control;
    return el;
  }

  function roleOf(el) {
    var role = (el.getAttribute('role') || '').trim().split(/\s+/)[0].toLowerCase();
    if (role && role !== 'presentation' && role !== 'none' && role !== 'generic') return role;
    var t = TAG(el);
    if (t === 'LABEL' && el.control) return roleOf(el.control);
    if (lc(el) === 'a' || t === 'AREA') return (el.hasAttribute('href') || el.hasAttribute('xlink:href')) ? 'link' : 'generic';
    if (t === 'BUTTON' || t === 'SUMMARY') return 'button';
    if (t === 'SELECT') return 'select';
    if (t === 'TEXTAREA') return 'textbox';
    if (t === 'INPUT') {
      var ty = inputType(el);
      if (ty === 'checkbox' || ty === 'radio') return ty;
      if (ty === 'submit' || ty === 'button' || ty === 'reset' || ty === 'image') return 'button';
      if (ty === 'range') return 'slider';
      if (ty === 'number') return 'spinbutton';
      if (ty === 'search') return 'searchbox';
      if (ty === 'file') return 'file';
      return 'textbox';
    }
    if (el.isContentEditable) return 'textbox';
    return 'clickable';
  }

  // Text of a subtree without the contents of form controls (so a wrapping label's text
  // does not include the options of the select it wraps).
  function labelText(label, except) {
    try {
      var clone = label.cloneNode(true);
      var drop = clone.querySelectorAll('select,textarea,input,button,script,style,datalist');
      for (var i = 0; i < drop.length; i++) drop[i].remove();
      var txt = collapse(clone.textContent);
      if (txt) return txt;
      return '';
    } catch (_) { return collapse(label.textContent); }
  }

  function byIdText(el, ids) {
    var root = el.getRootNode ? el.getRootNode() : document;
    var parts = [];
    ids.split(/\s+/).forEach(function (id) {
      if (!id) return;
      var t = (root.getElementById ? root.getElementById(id) : null) || document.getElementById(id);
      if (t) parts.push(collapse(t.innerText || t.textContent));
    });
    return collapse(parts.join(' '));
  }

  function shadowText(el) {
    if (!el.shadowRoot) return '';
    var parts = [];
    var kids = el.shadowRoot.children;
    for (var i = 0; i < kids.length; i++) {
      if (SKIP_TAGS[TAG(kids[i])]) continue;
      parts.push(kids[i].innerText || '');
    }
    return collapse(parts.join(' '));
  }

  function innerImgAlt(el) {
    if (TAG(el) === 'IMG' || (TAG(el) === 'INPUT' && inputType(el) === 'image')) {
      return collapse(el.getAttribute('alt'));
    }
    var imgs = el.querySelectorAll ? el.querySelectorAll('img[alt],svg[aria-label],[role=img][aria-label]') : [];
    for (var i = 0; i < imgs.length; i++) {
      var a = collapse(imgs[i].getAttribute('alt') || imgs[i].getAttribute('aria-label'));
      if (a) return a;
    }
    return '';
  }

  function nameOf(el) {
    var s = collapse(el.getAttribute('aria-label'));
    if (s) return cap(s, NAME_CAP);
    var lb = el.getAttribute('aria-labelledby');
    if (lb) { s = byIdText(el, lb); if (s) return cap(s, NAME_CAP); }
    var field = isFormField(el) || TAG(el) === 'BUTTON' || TAG(el) === 'METER' || TAG(el) === 'PROGRESS';
    if (field && el.labels && el.labels.length) {
      var parts = [];
      for (var i = 0; i < el.labels.length; i++) {
        var lt = labelText(el.labels[i], el);
        if (lt) parts.push(lt);
      }
      s = parts.join(' ');
      if (s) return cap(s, NAME_CAP);
    }
    if (TAG(el) === 'INPUT') {
      var ty = inputType(el);
      if (ty === 'submit' || ty === 'button' || ty === 'reset') {
        s = collapse(el.value) || (ty === 'submit' ? 'Submit' : ty === 'reset' ? 'Reset' : '');
        if (s) return cap(s, NAME_CAP);
      }
      if (ty === 'image') { s = collapse(el.getAttribute('alt')); if (s) return cap(s, NAME_CAP); }
    }
    s = collapse(el.getAttribute('placeholder'));
    if (s) return cap(s, NAME_CAP);
    var ownRole = (el.getAttribute('role') || '').trim().split(/\s+/)[0].toLowerCase();
    var holdsText = el.isContentEditable || ownRole === 'textbox' || ownRole === 'searchbox' || ownRole === 'combobox';
    if (!isFormField(el) && !holdsText) {
      var txt = el.innerText;
      if (txt && txt.length > 4 * NAME_CAP + 400) txt = txt.slice(0, 4 * NAME_CAP + 400);
      s = collapse(txt);
      if (!s) s = shadowText(el);
      if (s) return cap(s, NAME_CAP);
      s = innerImgAlt(el);
      if (s) return cap(s, NAME_CAP);
    }
    s = collapse(el.getAttribute('title'));
    if (s) return cap(s, NAME_CAP);
    if (TAG(el) === 'INPUT' || TAG(el) === 'TEXTAREA' || TAG(el) === 'SELECT') {
      s = collapse(el.getAttribute('name') || el.id);
      if (s) return cap(s, NAME_CAP);
    }
    return '';
  }

  function selectedLabel(sel) {
    var out = [];
    for (var i = 0; i < sel.options.length; i++) {
      var o = sel.options[i];
      if (o.selected) out.push(collapse(o.label || o.text));
    }
    return out.join(', ');
  }

  function hrefOf(el) {
    if (typeof el.href === 'string') return el.href;
    var raw = el.getAttribute('href') || el.getAttribute('xlink:href') || '';
    try { return new URL(raw, document.baseURI).href; } catch (_) { return raw; }
  }

  function shortHref(abs) {
    try {
      var u = new URL(abs);
      if (u.origin === location.origin && (u.protocol === 'http:' || u.protocol === 'https:')) {
        return (u.pathname + u.search + u.hash) || '/';
      }
    } catch (_) {}
    return abs.length > 120 ? abs.slice(0, 119) + '\u2026' : abs;
  }

  function isPassword(el) { return TAG(el) === 'INPUT' && inputType(el) === 'password'; }

  function checkedOf(el) {
    var s = stateEl(el);
    if (TAG(s) === 'INPUT' && (inputType(s) === 'checkbox' || inputType(s) === 'radio')) return !!s.checked;
    var ac = s.getAttribute('aria-checked');
    if (ac === 'true' || ac === 'mixed') return true;
    if (ac === 'false') return false;
    return undefined;
  }

  function ariaBool(el, attr) {
    var a = el.getAttribute(attr);
    if (a === 'true') return true;
    if (a === 'false') return false;
    return undefined;
  }

  function disabledOf(el) {
    var s = stateEl(el);
    if (s.disabled === true) return true;
    try { if (s.matches && s.matches(':disabled')) return true; } catch (_) {}
    for (var n = s; n; n = composedParent(n)) {
      if (n.nodeType === 1 && n.getAttribute('aria-disabled') === 'true') return true;
    }
    return false;
  }

  function expandedOf(el) {
    if (TAG(el) === 'SUMMARY' && el.parentElement && TAG(el.parentElement) === 'DETAILS') {
      return !!el.parentElement.open;
    }
    var a = el.getAttribute('aria-expanded');
    if (a === 'true') return true;
    if (a === 'false') return false;
    return undefined;
  }

  // The scope of a snapshot: the open modal dialog if any (the rest of the page is inert).
  function modalScope() {
    try {
      var m = document.querySelectorAll('dialog:modal');
      if (m.length) return m[m.length - 1];
    } catch (_) {}
    return null;
  }

  // ---------------------------------------------------------------- snapshot

  function describeEntry(el, i, role) {
    var r = rectOf(el);
    var s = stateEl(el);
    var e = { i: i, tag: lc(el), role: role, name: nameOf(el) };
    if (TAG(s) === 'INPUT') e.type = inputType(s);
    if (role === 'link') e.href = hrefOf(el);
    if (TAG(s) === 'SELECT') {
      e.value = cap(selectedLabel(s), VALUE_CAP);
    } else if ((TAG(s) === 'INPUT' && TEXTLIKE_TYPES[inputType(s)]) || TAG(s) === 'TEXTAREA') {
      if (isPassword(s)) { if (s.value) e.value = PASSWORD_MASK; }
      else if (s.value) e.value = s.value.length > VALUE_CAP ? s.value.slice(0, VALUE_CAP - 1) + '\u2026' : s.value;
    } else if (TAG(s) === 'INPUT' && inputType(s) === 'file' && s.files && s.files.length) {
      e.value = Array.prototype.map.call(s.files, function (f) { return f.name; }).join(', ');
    } else if (el.isContentEditable && role === 'textbox' && s === el) {
      var ct = collapse(el.innerText);
      if (ct) e.value = cap(ct, VALUE_CAP);
    }
    var ch = checkedOf(el);
    if (ch !== undefined) e.checked = ch;
    var sl = ariaBool(el, 'aria-selected');
    if (sl !== undefined) e.selected = sl;
    var pr = ariaBool(el, 'aria-pressed');
    if (pr !== undefined) e.pressed = pr;
    if (disabledOf(el)) e.disabled = true;
    var ex = expandedOf(el);
    if (ex !== undefined) e.expanded = ex;
    e.x = r.x; e.y = r.y; e.w = r.w; e.h = r.h;
    e.inViewport = inViewport(r);
    return e;
  }

  function renderLine(e) {
    var line = '[' + e.i + '] ' + e.role + ' ' + JSON.stringify(e.name);
    if (e.type && !{ text: 1, checkbox: 1, radio: 1, submit: 1, button: 1, reset: 1, file: 1, search: 1, number: 1, range: 1 }[e.type]) {
      line += ' type=' + e.type;
    }
    if (e.role === 'link' && e.href) line += ' \u2192 ' + shortHref(e.href);
    if (e.value !== undefined && e.value !== '') {
      var v = e.value.length > 100 ? e.value.slice(0, 99) + '\u2026' : e.value;
      line += (e.role === 'select' ? ' = ' : ' value=') + JSON.stringify(v);
    }
    if (e.checked === true) line += ' checked';
    if (e.selected === true) line += ' selected';
    if (e.pressed === true) line += ' pressed';
    if (e.expanded === true) line += ' expanded';
    else if (e.expanded === false) line += ' collapsed';
    if (e.disabled) line += ' disabled';
    return line;
  }

  function snapshot(opts) {
    opts = opts || {};
    var maxChars = opts.maxChars > 0 ? opts.maxChars : 8000;
    var maxElements = opts.maxElements > 0 ? opts.maxElements : 2000;
    var pointer = opts.cursorPointer !== false;
    var scope = modalScope();

    var entries = [];          // {el, kind, name}
    var listed = new Map();    // element -> entry (also the inner element after a swap)
    var capped = false;

    walk(document.documentElement, function (el) {
      if (entries.length >= maxElements) { capped = true; return false; }
      var kind = actionKind(el, pointer);
      if (!kind) return true;
      if (scope && !composedContains(scope, el)) return true;
      if (!visible(el) || hiddenFromUsers(el)) return true;
      // The nearest listed ancestor, for deduplication.
      var anc = null;
      for (var p = composedParent(el); p; p = composedParent(p)) {
        if (listed.has(p)) { anc = listed.get(p); break; }
      }
      if (kind === 'pointer' && anc) return true;
      var name = null;
      if (anc) {
        name = nameOf(el);
        var same = !name || name.toLowerCase() === anc.name.toLowerCase();
        if (same) {
          if (anc.kind !== 'strong' && kind === 'strong' && anc.name.toLowerCase() === (name || '').toLowerCase()) {
            // A div with onclick wrapping a real button of the same name: keep the button.
            anc.el = el; anc.kind = kind;
            listed.set(el, anc);
          }
          return true;
        }
      }
      if (kind === 'pointer') {
        name = nameOf(el);
        if (!name) return true;
      }
      var entry = { el: el, kind: kind, name: name == null ? nameOf(el) : name };
      entries.push(entry);
      listed.set(el, entry);
      return true;
    });

    var els = [];
    var elements = [];
    for (var k = 0; k < entries.length; k++) {
      var el = entries[k].el;
      els.push(el);
      elements.push(describeEntry(el, k + 1, roleOf(el)));
    }
    api.els = els;

    var lines = [];
    var used = 0;
    var truncated = false;
    var reserve = 40;
    for (var j = 0; j < elements.length; j++) {
      var line = renderLine(elements[j]);
      if (used + line.length + 1 > maxChars - reserve) {
        truncated = true;
        lines.push('\u2026 ' + (elements.length - j) + ' more elements');
        break;
      }
      lines.push(line);
      used += line.length + 1;
    }
    if (!elements.length) lines.push('(no interactive elements)');
    if (capped && !truncated) {
      truncated = true;
      lines.push('\u2026 more elements not listed (limit ' + maxElements + ')');
    }
    var out = { text: lines.join('\n'), count: elements.length, truncated: truncated, elements: elements };
    if (scope) out.modal = true;
    return out;
  }

  // ---------------------------------------------------------------- resolving targets

  function isXPath(sel) {
    return sel.charAt(0) === '/' || sel.charAt(0) === '(' || sel.indexOf('xpath=') === 0;
  }

  function queryAllDeep(sel) {
    var out = [];
    if (isXPath(sel)) {
      var xp = sel.indexOf('xpath=') === 0 ? sel.slice(6) : sel;
      var res = document.evaluate(xp, document, null, XPathResult.ORDERED_NODE_SNAPSHOT_TYPE, null);
      for (var i = 0; i < res.snapshotLength; i++) {
        var n = res.snapshotItem(i);
        if (isEl(n)) out.push(n);
        else if (n && n.parentElement) out.push(n.parentElement);
      }
      return out;
    }
    var css = sel.indexOf('css=') === 0 ? sel.slice(4) : sel;
    var found = document.querySelectorAll(css);
    for (var j = 0; j < found.length; j++) out.push(found[j]);
    var roots = allShadowRoots();
    for (var r = 0; r < roots.length; r++) {
      var f = roots[r].querySelectorAll(css);
      for (var m = 0; m < f.length; m++) out.push(f[m]);
    }
    return out;
  }

  function refLabel(ref) {
    return typeof ref === 'number' ? '[' + ref + ']' : JSON.stringify(String(ref));
  }

  // ref: snapshot index (number, "3" or "[3]") or a CSS selector / XPath.
  // Returns {el} or {error}.
  function resolve(ref) {
    if (typeof ref === 'string') {
      var m = /^\s*\[?(\d+)\]?\s*$/.exec(ref);
      if (m) ref = parseInt(m[1], 10);
    }
    if (typeof ref === 'number') {
      var el = api.els && api.els[ref - 1];
      if (!el) return { error: 'no element [' + ref + ']: take a snapshot first' };
      if (!el.isConnected) return { error: 'element [' + ref + '] is gone (the page changed): take a new snapshot' };
      return { el: el, label: '[' + ref + ']', i: ref };
    }
    if (typeof ref !== 'string' || !ref.trim()) return { error: 'expected an element number or a selector' };
    var list;
    try { list = queryAllDeep(ref.trim()); } catch (e) { return { error: 'bad selector ' + JSON.stringify(ref) + ': ' + errMsg(e) }; }
    if (!list.length) return { error: 'no element matches ' + JSON.stringify(ref) };
    // Prefer the first visible match.
    var pick = list[0];
    for (var k = 0; k < list.length; k++) { if (visible(list[k])) { pick = list[k]; break; } }
    var idx = api.els ? api.els.indexOf(pick) : -1;
    return { el: pick, label: JSON.stringify(ref), i: idx >= 0 ? idx + 1 : undefined };
  }

  // The deepest element at a viewport point, through open shadow roots.
  function deepElementFromPoint(x, y) {
    var e = document.elementFromPoint(x, y);
    while (e && e.shadowRoot) {
      var inner = e.shadowRoot.elementFromPoint(x, y);
      if (!inner || inner === e) break;
      e = inner;
    }
    return e;
  }

  function targetEl(el, label, idx) {
    var r0 = el.getBoundingClientRect();
    var fully = r0.top >= 0 && r0.left >= 0 && r0.bottom <= window.innerHeight && r0.right <= window.innerWidth;
    if (!fully) {
      try { el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' }); }
      catch (_) { el.scrollIntoView(); }
    }
    var r = el.getBoundingClientRect();
    if (!(r.width > 0 && r.height > 0)) return { error: 'element ' + label + ' is not visible (it has no size)' };
    var cx = r.left + r.width / 2, cy = r.top + r.height / 2;
    var rects = el.getClientRects();
    if (rects.length > 1) {
      // Inline elements broken over lines: the bounding box centre may fall between
      // fragments; aim at the first fragment with a size.
      for (var k = 0; k < rects.length; k++) {
        if (rects[k].width > 0 && rects[k].height > 0) {
          cx = rects[k].left + rects[k].width / 2; cy = rects[k].top + rects[k].height / 2;
          break;
        }
      }
    }
    var out = {
      x: Math.round(r.left), y: Math.round(r.top), w: Math.round(r.width), h: Math.round(r.height),
      cx: Math.round(cx), cy: Math.round(cy), tag: lc(el), name: nameOf(el)
    };
    if (idx !== undefined) out.i = idx;
    out.inViewport = out.cx >= 0 && out.cy >= 0 && out.cx < window.innerWidth && out.cy < window.innerHeight;
    if (out.inViewport) {
      var hit = deepElementFromPoint(out.cx, out.cy);
      var ok = !hit || composedContains(el, hit) || (el.labels && Array.prototype.indexOf.call(el.labels, hit) >= 0);
      if (!ok && hit && TAG(el) === 'LABEL' && el.control && composedContains(el.control, hit)) ok = true;
      if (!ok && hit && TAG(hit) === 'LABEL' && hit.control === el) ok = true;
      if (!ok) { out.obscured = true; out.obscuredBy = describe(hit); }
    }
    return out;
  }

  function target(i) {
    if (typeof i !== 'string' && !(Number(i) > 0)) return { error: 'expected an element number from the snapshot' };
    var r = resolve(typeof i === 'string' ? i : Number(i));
    if (r.error) return { error: r.error };
    return targetEl(r.el, r.label, r.i);
  }

  function targetSelector(sel) {
    var r = resolve(String(sel));
    if (r.error) return { error: r.error };
    return targetEl(r.el, r.label, r.i);
  }

  // ---------------------------------------------------------------- fill / select

  function fillableFrom(el) {
    if (TAG(el) === 'LABEL' && el.control) return el.control;
    if (TAG(el) === 'INPUT' || TAG(el) === 'TEXTAREA' || TAG(el) === 'SELECT' || el.isContentEditable) return el;
    // A wrapper around exactly one fillable control.
    var inner = el.querySelectorAll('input:not([type=hidden]),textarea,[contenteditable]:not([contenteditable=false])');
    var cands = [];
    for (var i = 0; i < inner.length; i++) {
      var c = inner[i];
      if (TAG(c) === 'INPUT' && NOT_FILLABLE_TYPES[inputType(c)]) continue;
      cands.push(c);
    }
    if (cands.length === 1) return cands[0];
    if (el.shadowRoot) {
      var s = el.shadowRoot.querySelectorAll('input:not([type=hidden]),textarea');
      if (s.length === 1) return s[0];
    }
    return el;
  }

  function fire(el, type, init) {
    var ev;
    if (type === 'input' && typeof InputEvent === 'function') {
      ev = new InputEvent('input', Object.assign({ bubbles: true, composed: true, cancelable: false }, init || {}));
    } else {
      ev = new Event(type, { bubbles: true, composed: type !== 'change', cancelable: false });
    }
    el.dispatchEvent(ev);
  }

  function nativeSetter(el, prop) {
    var proto = TAG(el) === 'TEXTAREA' ? HTMLTextAreaElement.prototype
      : TAG(el) === 'SELECT' ? HTMLSelectElement.prototype : HTMLInputElement.prototype;
    var d = Object.getOwnPropertyDescriptor(proto, prop);
    return d && d.set;
  }

  function fill(ref, text) {
    var r = resolve(ref);
    if (r.error) return { error: r.error };
    var el = fillableFrom(r.el);
    text = text == null ? '' : String(text);
    if (TAG(el) === 'SELECT') return { error: 'element ' + r.label + ' is a select: use select' };
    var isInput = TAG(el) === 'INPUT', isArea = TAG(el) === 'TEXTAREA';
    if (isInput && NOT_FILLABLE_TYPES[inputType(el)]) {
      return { error: 'element ' + r.label + ' is an input of type ' + inputType(el) + ', not fillable' + (inputType(el) === 'checkbox' || inputType(el) === 'radio' ? ': click it instead' : '') };
    }
    if (!isInput && !isArea && !el.isContentEditable) {
      return { error: 'element ' + r.label + ' (' + describe(el) + ') is not fillable' };
    }
    if (el.disabled || (el.matches && el.matches(':disabled'))) return { error: 'element ' + r.label + ' is disabled' };
    if ((isInput || isArea) && el.readOnly) return { error: 'element ' + r.label + ' is read-only' };
    try { el.focus({ preventScroll: false }); } catch (_) { el.focus(); }

    if (isInput || isArea) {
      var set = nativeSetter(el, 'value');
      if (set) set.call(el, text); else el.value = text;
      fire(el, 'input', { inputType: 'insertText', data: text });
      fire(el, 'change');
      var out = { ok: true, password: isPassword(el) };
      if (!isPassword(el)) {
        out.value = el.value;
        if (el.value !== text) out.warning = 'the field holds ' + JSON.stringify(el.value) + ' (the page or the input type changed the text)';
      } else if (el.value !== text) {
        out.warning = 'the password field did not keep the text as given';
      }
      return out;
    }

    // contenteditable: try the editing command first (rich editors listen to beforeinput),
    // fall back to textContent.
    var done = false;
    try {
      var selObj = window.getSelection();
      var range = document.createRange();
      range.selectNodeContents(el);
      selObj.removeAllRanges();
      selObj.addRange(range);
      done = text === '' ? document.execCommand('delete', false) : document.execCommand('insertText', false, text);
      if (done && collapse(el.innerText) !== collapse(text)) done = false;
    } catch (_) { done = false; }
    if (!done) {
      el.textContent = text;
      fire(el, 'input', { inputType: 'insertText', data: text });
    }
    return { ok: true, value: cap(el.innerText, VALUE_CAP * 5) };
  }

  function select(ref, want) {
    var r = resolve(ref);
    if (r.error) return { error: r.error };
    var el = r.el;
    if (TAG(el) === 'LABEL' && el.control) el = el.control;
    if (TAG(el) !== 'SELECT') {
      var inner = el.querySelectorAll ? el.querySelectorAll('select') : [];
      if (inner.length === 1) el = inner[0];
    }
    if (TAG(el) !== 'SELECT') {
      return { error: 'element ' + r.label + ' is not a native <select> (' + describe(el) + '): click it, then click the option' };
    }
    if (el.disabled) return { error: 'select ' + r.label + ' is disabled' };
    if (typeof want === 'string' || typeof want === 'number') want = { label: String(want), any: true };
    want = want || {};
    var opts = el.options;
    var idx = -1, k, o;
    var wl = want.label != null ? collapse(want.label).toLowerCase() : null;
    var wv = want.value != null ? String(want.value) : null;
    if (wv !== null) {
      for (k = 0; k < opts.length; k++) if (opts[k].value === wv) { idx = k; break; }
    }
    if (idx < 0 && wl !== null) {
      for (k = 0; k < opts.length; k++) {
        o = opts[k];
        if (collapse(o.label || o.text).toLowerCase() === wl || collapse(o.text).toLowerCase() === wl) { idx = k; break; }
      }
      if (idx < 0) {   // a label given may be the value
        for (k = 0; k < opts.length; k++) if (opts[k].value.toLowerCase() === wl) { idx = k; break; }
      }
      if (idx < 0) {   // a unique partial match
        var hits = [];
        for (k = 0; k < opts.length; k++) if (collapse(opts[k].label || opts[k].text).toLowerCase().indexOf(wl) >= 0) hits.push(k);
        if (hits.length === 1) idx = hits[0];
      }
    }
    if (idx < 0) {
      var names = [];
      for (k = 0; k < opts.length && k < 20; k++) names.push(collapse(opts[k].label || opts[k].text) || opts[k].value);
      var more = opts.length > 20 ? ', \u2026 (' + opts.length + ' in all)' : '';
      var asked = wl !== null ? want.label : wv;
      return { error: 'no option ' + JSON.stringify(String(asked)).replace(/^"|"$/g, "'") + ' in select ' + r.label + '; options: ' + names.join(', ') + more };
    }
    if (opts[idx].disabled) return { error: 'option ' + JSON.stringify(collapse(opts[idx].text)) + ' in select ' + r.label + ' is disabled' };
    try { el.focus({ preventScroll: false }); } catch (_) {}
    if (el.multiple) {
      opts[idx].selected = true;
    } else {
      var d = Object.getOwnPropertyDescriptor(HTMLSelectElement.prototype, 'selectedIndex');
      if (d && d.set) d.set.call(el, idx); else el.selectedIndex = idx;
    }
    fire(el, 'input');
    fire(el, 'change');
    var so = el.options[el.selectedIndex] || opts[idx];
    return { ok: true, selected: { label: collapse(so.label || so.text), value: so.value } };
  }

  // attribute(ref, name) -> {value: string | null}. For `value` on form fields, the live
  // value (passwords masked); otherwise the attribute as written.
  function attribute(ref, name) {
    var r = resolve(ref);
    if (r.error) return { error: r.error };
    var el = r.el;
    name = String(name == null ? '' : name).trim();
    if (!name) return { error: 'no attribute name given' };
    var t = TAG(el);
    if (name.toLowerCase() === 'value' && (t === 'INPUT' || t === 'TEXTAREA' || t === 'SELECT')) {
      if (isPassword(el)) return { value: el.value ? PASSWORD_MASK : '' };
      return { value: el.value };
    }
    if (isPassword(el) && name.toLowerCase() === 'value') return { value: PASSWORD_MASK };
    return { value: el.getAttribute(name) };
  }

  // ---------------------------------------------------------------- scroll

  function docScrolls() {
    var se = document.scrollingElement || document.documentElement;
    if (se.scrollHeight <= window.innerHeight + 1) return false;
    var h = getComputedStyle(document.documentElement).overflowY;
    if (h === 'hidden' || h === 'clip') return false;
    if (document.body && (h === 'visible' || h === '')) {
      var b = getComputedStyle(document.body).overflowY;
      if (b === 'hidden' || b === 'clip') return false;
    }
    return true;
  }

  function largestScroller() {
    var best = null, bestArea = 0;
    var vw = window.innerWidth, vh = window.innerHeight;
    walk(document.documentElement, function (el) {
      if (el.scrollHeight > el.clientHeight + 1 && el.clientHeight > 0) {
        var oy = getComputedStyle(el).overflowY;
        if (oy === 'auto' || oy === 'scroll' || oy === 'overlay') {
          var r = el.getBoundingClientRect();
          var w = Math.max(0, Math.min(r.right, vw) - Math.max(r.left, 0));
          var h = Math.max(0, Math.min(r.bottom, vh) - Math.max(r.top, 0));
          var area = w * h;
          if (area > bestArea && visible(el)) { best = el; bestArea = area; }
        }
      }
      return true;
    });
    return best;
  }

  function scrollHints(sc, isDoc) {
    var top = isDoc ? (window.scrollY || (document.scrollingElement || document.documentElement).scrollTop) : sc.scrollTop;
    var sh = isDoc ? (document.scrollingElement || document.documentElement).scrollHeight : sc.scrollHeight;
    var vh = isDoc ? window.innerHeight : sc.clientHeight;
    var below = Math.max(0, sh - vh - top);
    return {
      scrollY: Math.round(top), scrollHeight: Math.round(sh), viewportHeight: Math.round(vh),
      pixelsAbove: Math.round(Math.max(0, top)), pixelsBelow: Math.round(below),
      atTop: top <= 1, atBottom: below <= 1,
      container: isDoc ? 'document' : describe(sc)
    };
  }

  // scroll(direction, {target?, amount?}): direction up|down|top|bottom; amount is the
  // fraction of the visible height moved by up/down (0.8). target: an element number or
  // selector whose scrollable ancestor (or itself) is scrolled instead.
  function scroll(direction, opts) {
    opts = opts || {};
    var dir = String(direction || 'down').toLowerCase();
    if (!{ up: 1, down: 1, top: 1, bottom: 1 }[dir]) return { error: 'direction must be up, down, top or bottom' };
    var sc = null, isDoc = false;
    if (opts.target != null) {
      var r = resolve(opts.target);
      if (r.error) return { error: r.error };
      for (var n = r.el; n; n = composedParent(n)) {
        if (n.nodeType !== 1 || n === document.documentElement || n === document.body) break;
        var oy = getComputedStyle(n).overflowY;
        if (n.scrollHeight > n.clientHeight + 1 && (oy === 'auto' || oy === 'scroll' || oy === 'overlay')) { sc = n; break; }
      }
    }
    if (!sc) {
      if (docScrolls()) isDoc = true;
      else { sc = largestScroller(); if (!sc) isDoc = true; }
    }
    var frac = opts.amount > 0 ? opts.amount : 0.8;
    var se = document.scrollingElement || document.documentElement;
    var vh = isDoc ? window.innerHeight : sc.clientHeight;
    var sh = isDoc ? se.scrollHeight : sc.scrollHeight;
    var cur = isDoc ? window.scrollY : sc.scrollTop;
    var to = dir === 'top' ? 0 : dir === 'bottom' ? sh : dir === 'down' ? cur + vh * frac : cur - vh * frac;
    if (isDoc) window.scrollTo({ top: to, behavior: 'instant' });
    else sc.scrollTo({ top: to, behavior: 'instant' });
    return scrollHints(sc, isDoc);
  }

  // ---------------------------------------------------------------- text: find, waitCheck

  // Visible text nodes in document order (through open shadow roots), joined into one
  // whitespace-collapsed string with a space at block boundaries.
  function collectText() {
    var nodes = [], starts = [], parts = [];
    var visCache = new Map(), blockCache = new Map();
    var len = 0, lastBlock = null;

    function isVis(el) {
      if (visCache.has(el)) return visCache.get(el);
      var v;
      try { v = el.checkVisibility ? el.checkVisibility({ checkVisibilityCSS: true }) : !!el.getClientRects().length; } catch (_) { v = false; }
      visCache.set(el, v);
      return v;
    }
    function blockOf(el) {
      var n = el;
      while (n) {
        if (blockCache.has(n)) return blockCache.get(n);
        var d = '';
        try { d = getComputedStyle(n).display; } catch (_) {}
        if (d && d.indexOf('inline') !== 0 && d !== 'contents') break;
        n = composedParent(n);
      }
      blockCache.set(el, n);
      return n;
    }

    function visitChildren(parent) {
      var kids = parent.childNodes;
      for (var i = 0; i < kids.length; i++) visitNode(kids[i]);
    }
    function visitNode(n) {
      if (n.nodeType === 3) {
        var pe = n.parentElement || (n.parentNode && n.parentNode.host);
        if (!pe || !isVis(pe)) return;
        var t = n.nodeValue.replace(/\s+/g, ' ');
        if (!t || t === ' ') {
          if (t === ' ' && len && parts[parts.length - 1].slice(-1) !== ' ') { parts.push(' '); nodes.push(n); starts.push(len); len += 1; }
          return;
        }
        var b = blockOf(pe);
        if (lastBlock !== null && b !== lastBlock && len && parts[parts.length - 1].slice(-1) !== ' ' && t.charAt(0) !== ' ') {
          parts.push(' '); nodes.push(n); starts.push(len); len += 1;
        }
        lastBlock = b;
        nodes.push(n); starts.push(len); parts.push(t); len += t.length;
        return;
      }
      if (n.nodeType !== 1) return;
      if (SKIP_TAGS[TAG(n)] || n.id === OVERLAY_ID) return;
      if (TAG(n) === 'SELECT' || TAG(n) === 'TEXTAREA') return;
      if (n.shadowRoot) {
        visitChildren(n.shadowRoot);
        // Light children only show when slotted: visit the slotted ones via their slots.
        return;
      }
      if (TAG(n) === 'SLOT') {
        var assigned = n.assignedNodes({ flatten: false });
        if (assigned.length) { for (var a = 0; a < assigned.length; a++) visitNode(assigned[a]); return; }
      }
      visitChildren(n);
    }
    if (document.body) visitNode(document.body);
    else if (document.documentElement) visitNode(document.documentElement);
    return { text: parts.join(''), nodes: nodes, starts: starts };
  }

  function nodeAt(ct, pos) {
    var lo = 0, hi = ct.starts.length - 1;
    while (lo < hi) {
      var mid = (lo + hi + 1) >> 1;
      if (ct.starts[mid] <= pos) lo = mid; else hi = mid - 1;
    }
    return ct.nodes[lo];
  }

  function find(text, opts) {
    opts = opts || {};
    var maxResults = opts.maxResults > 0 ? opts.maxResults : 20;
    var needle = collapse(text).toLowerCase();
    if (!needle) return { error: 'nothing to find' };
    if (!api.els || !api.els.length) snapshot({ maxChars: 1 });
    var index = new Map();
    for (var k = 0; k < api.els.length; k++) if (api.els[k].isConnected) index.set(api.els[k], k + 1);
    var ct = collectText();
    var hay = ct.text.toLowerCase();
    var matches = [], count = 0, pos = 0;
    var CTX = 80;
    while ((pos = hay.indexOf(needle, pos)) >= 0) {
      count++;
      if (matches.length < maxResults) {
        var s = Math.max(0, pos - CTX), e = Math.min(ct.text.length, pos + needle.length + CTX);
        var snippet = (s > 0 ? '\u2026' : '') + ct.text.slice(s, e).trim() + (e < ct.text.length ? '\u2026' : '');
        var m = { text: snippet };
        var node = nodeAt(ct, pos);
        var el = null;
        for (var p = node && (node.parentElement || (node.parentNode && node.parentNode.host)); p; p = composedParent(p)) {
          if (index.has(p)) { el = index.get(p); break; }
        }
        if (el) m.element = el;
        try {
          var range = document.createRange();
          range.selectNodeContents(node);
          var rr = range.getBoundingClientRect();
          m.inViewport = rr.bottom > 0 && rr.top < window.innerHeight && rr.right > 0 && rr.left < window.innerWidth;
          m.y = Math.round(rr.top + window.scrollY);
        } catch (_) {}
        matches.push(m);
      }
      pos += needle.length;
    }
    return { count: count, matches: matches };
  }

  function waitCheck(opts) {
    opts = opts || {};
    var out = { found: true };
    if (opts.selector) {
      var list;
      try { list = queryAllDeep(String(opts.selector)); } catch (e) { return { found: false, error: 'bad selector: ' + errMsg(e) }; }
      var ok = false;
      if (opts.visible === false) ok = list.length > 0;
      else for (var i = 0; i < list.length; i++) if (visible(list[i])) { ok = true; break; }
      out.selector = ok;
      if (!ok) out.found = false;
    }
    if (opts.text) {
      var needle = collapse(opts.text).toLowerCase();
      // Fast path: the body's rendered text; the full walk (shadow roots) only if needed.
      var body = document.body ? collapse(document.body.innerText).toLowerCase() : '';
      var hit = body.indexOf(needle) >= 0;
      if (!hit && allShadowRoots().length) hit = collectText().text.toLowerCase().indexOf(needle) >= 0;
      out.text = hit;
      if (!hit) out.found = false;
    }
    if (!opts.selector && !opts.text) out.found = document.readyState !== 'loading';
    return out;
  }

  function idleState() {
    var pending = 0;
    var imgs = document.images;
    for (var i = 0; i < imgs.length; i++) {
      var im = imgs[i];
      if (im.complete) continue;
      if ((im.getAttribute('loading') || '').toLowerCase() === 'lazy') continue;
      pending++;
    }
    return {
      readyState: document.readyState,
      pendingImages: pending,
      fontsLoading: !!(document.fonts && document.fonts.status === 'loading')
    };
  }

  // ---------------------------------------------------------------- read

  function read() {
    var ov = overlayEl();
    var ovParent = ov && ov.parentNode, ovNext = ov && ov.nextSibling;
    if (ov) ov.remove();
    try {
      var html;
      var root = document.documentElement;
      if (!root) html = '';
      else if (typeof root.getHTML === 'function') {
        var inner = root.getHTML({ serializableShadowRoots: true, shadowRoots: allShadowRoots() });
        var shell = root.cloneNode(false).outerHTML;
        var close = shell.lastIndexOf('</');
        html = close > 0 ? shell.slice(0, close) + inner + shell.slice(close) : root.outerHTML;
      } else {
        html = root.outerHTML;
      }
      if (document.doctype) html = '<!DOCTYPE ' + (document.doctype.name || 'html') + '>' + html;
      return {
        title: document.title || '',
        url: location.href,
        html: html,
        text: document.body ? document.body.innerText : ''
      };
    } finally {
      if (ov && ovParent) ovParent.insertBefore(ov, ovNext && ovNext.parentNode === ovParent ? ovNext : null);
    }
  }

  // ---------------------------------------------------------------- overlays

  var BASE_CSS = 'all:initial;position:fixed;box-sizing:border-box;pointer-events:none;';

  function overlayContainer() {
    var c = overlayEl();
    if (c) return c;
    c = document.createElement('div');
    c.id = OVERLAY_ID;
    c.setAttribute('aria-hidden', 'true');
    c.style.cssText = BASE_CSS + 'left:0;top:0;width:100vw;height:100vh;margin:0;padding:0;border:0;' +
      'background:transparent;overflow:visible;z-index:2147483647;display:block;contain:layout style;';
    document.documentElement.appendChild(c);
    // In the top layer when possible, so modal dialogs and popovers do not cover it.
    try {
      if (typeof c.showPopover === 'function') {
        c.setAttribute('popover', 'manual');
        c.showPopover();
      }
    } catch (_) {}
    return c;
  }

  function layer(name) {
    var c = overlayContainer();
    var old = c.querySelector('[data-trawl-layer="' + name + '"]');
    if (old) old.remove();
    var l = document.createElement('div');
    l.setAttribute('data-trawl-layer', name);
    l.style.cssText = BASE_CSS + 'left:0;top:0;width:0;height:0;display:block;';
    c.appendChild(l);
    return l;
  }

  var COLORS = ['#e6194b', '#3cb44b', '#4363d8', '#f58231', '#911eb4', '#008080', '#9a6324', '#800000', '#000075', '#d61a9f'];

  function box(parent, css) {
    var d = document.createElement('div');
    d.style.cssText = BASE_CSS + 'display:block;' + css;
    parent.appendChild(d);
    return d;
  }

  function highlight(opts) {
    var snap = snapshot(opts || {});
    if (snap.error) return snap;
    var l = layer('marks');
    var vw = window.innerWidth, vh = window.innerHeight;
    snap.elements.forEach(function (e) {
      if (!e.inViewport) return;
      var col = COLORS[e.i % COLORS.length];
      box(l, 'left:' + e.x + 'px;top:' + e.y + 'px;width:' + e.w + 'px;height:' + e.h + 'px;border:2px solid ' + col + ';');
      var lx = Math.min(Math.max(e.x, 0), vw - 24), ly = e.y - 16 >= 0 ? e.y - 16 : Math.max(e.y, 0);
      if (ly > vh - 16) ly = vh - 16;
      var tag = box(l, 'left:' + lx + 'px;top:' + ly + 'px;padding:0 3px;background:' + col +
        ';color:#fff;font:bold 11px/16px monospace;white-space:nowrap;');
      tag.textContent = String(e.i);
    });
    return snap;
  }

  function grid(opts) {
    var step = opts && opts.step > 0 ? opts.step : 100;
    var l = layer('grid');
    var vw = window.innerWidth, vh = window.innerHeight;
    var lab = 'background:rgba(255,255,255,.85);color:#c00;font:10px/12px monospace;padding:0 2px;white-space:nowrap;';
    for (var x = 0; x <= vw; x += step) {
      box(l, 'left:' + x + 'px;top:0;width:0;height:' + vh + 'px;border-left:1px solid rgba(255,0,0,.45);');
      box(l, 'left:' + (x + 2) + 'px;top:0;' + lab).textContent = String(x);
    }
    for (var y = 0; y <= vh; y += step) {
      box(l, 'left:0;top:' + y + 'px;width:' + vw + 'px;height:0;border-top:1px solid rgba(255,0,0,.45);');
      if (y > 0) box(l, 'left:2px;top:' + (y + 1) + 'px;' + lab).textContent = String(y);
    }
    return { ok: true, step: step, width: vw, height: vh };
  }

  function clear() {
    var c = overlayEl();
    if (c) {
      try { if (c.hidePopover && c.matches(':popover-open')) c.hidePopover(); } catch (_) {}
      c.remove();
    }
    return { ok: true };
  }

  // The HTTP status of the document's own response (0 when unknown).
  function navigationStatus() {
    var nav = performance.getEntriesByType('navigation')[0];
    return (nav && nav.responseStatus) || 0;
  }

  // ---------------------------------------------------------------- install

  var api = {
    version: VERSION,
    els: (window.__trawl && window.__trawl.els) || [],
    snapshot: guard(snapshot),
    target: guard(target),
    targetSelector: guard(targetSelector),
    fill: guard(fill),
    select: guard(select),
    attribute: guard(attribute),
    scroll: guard(scroll),
    find: guard(find),
    read: guard(read),
    highlight: guard(highlight),
    grid: guard(grid),
    clear: guard(clear),
    idleState: guard(idleState),
    waitCheck: guard(waitCheck),
    navigationStatus: guard(navigationStatus)
  };
  try {
    Object.defineProperty(window, '__trawl', { value: api, configurable: true, enumerable: false, writable: true });
  } catch (_) {
    window.__trawl = api;
  }
})();
