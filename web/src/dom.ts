// Small helpers to build the page's elements without innerHTML (names and kernel names are data).

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Record<string, string> = {},
  ...children: (Node | string | null | undefined)[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === 'class') element.className = value;
    else element.setAttribute(name, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    element.append(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return element;
}

// What a view shows when the report lacks its data: one sentence naming what is missing.
export function missing(view: string, sentence: string): HTMLElement {
  return el('p', { class: 'missing', 'data-missing': view }, sentence);
}

export function table(headers: string[], rows: (Node | string)[][], attributes: Record<string, string> = {}): HTMLTableElement {
  return el(
    'table',
    attributes,
    el('thead', {}, el('tr', {}, ...headers.map((h) => el('th', {}, h)))),
    el('tbody', {}, ...rows.map((row) => el('tr', {}, ...row.map((cell) => el('td', {}, cell))))),
  );
}
