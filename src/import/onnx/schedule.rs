//! Graph plumbing: the values each node reads (If branches included), the order nodes run in.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use tract_onnx::pb::{GraphProto, NodeProto};

/// The values a node reads: its inputs, then the outer-scope values its subgraphs (If branches)
/// read, which ONNX does not list as inputs.
pub(super) fn node_reads(n: &NodeProto) -> Vec<&str> {
    let mut reads: Vec<&str> = n
        .input
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| s.as_str())
        .collect();
    for g in subgraphs(n) {
        outer_reads(g, &mut reads);
    }
    reads
}

fn subgraphs(n: &NodeProto) -> impl Iterator<Item = &GraphProto> {
    n.attribute
        .iter()
        .flat_map(|a| a.g.iter().chain(a.graphs.iter()))
}

/// Adds to `reads` the values `g` reads from its enclosing scopes.
pub(super) fn outer_reads<'a>(g: &'a GraphProto, reads: &mut Vec<&'a str>) {
    let mut local: HashSet<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
    local.extend(g.input.iter().map(|v| v.name.as_str()));
    for n in &g.node {
        local.extend(n.output.iter().map(|o| o.as_str()));
    }
    let mut inner = Vec::new();
    for n in &g.node {
        inner.extend(node_reads(n));
    }
    inner.extend(g.output.iter().map(|o| o.name.as_str()));
    for r in inner {
        if !r.is_empty() && !local.contains(r) && !reads.contains(&r) {
            reads.push(r);
        }
    }
}

/// Every value name produced inside the subgraphs of `n` (reserved like the graph's own).
pub(super) fn subgraph_values(n: &NodeProto, out: &mut Vec<String>) {
    for g in subgraphs(n) {
        out.extend(g.initializer.iter().map(|t| t.name.clone()));
        for m in &g.node {
            out.extend(m.output.iter().filter(|o| !o.is_empty()).cloned());
            subgraph_values(m, out);
        }
    }
}

/// A name for a node in messages: its name, else its first output, else its op and index.
pub(super) fn node_label(n: &NodeProto, idx: usize) -> String {
    if !n.name.is_empty() {
        n.name.clone()
    } else if let Some(o) = n.output.iter().find(|o| !o.is_empty()) {
        o.clone()
    } else {
        format!("{}#{idx}", n.op_type)
    }
}

/// Checks every value is defined once, then returns the nodes the graph outputs depend on, in a
/// topological order (the file's order where it already is one). A subgraph (`nested`) may read
/// values of the enclosing graph: those are not checked here.
pub(super) fn schedule(
    graph: &GraphProto,
    nested: bool,
) -> std::result::Result<Vec<usize>, String> {
    let mut available: HashSet<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    available.extend(graph.input.iter().map(|v| v.name.as_str()));
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in graph.node.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            if available.contains(o.as_str()) {
                return Err(format!(
                    "node '{}' ({}): output '{o}' redefines a graph input or initializer",
                    node_label(n, i),
                    n.op_type
                ));
            }
            if let Some(&j) = producer.get(o.as_str()) {
                return Err(format!(
                    "value '{o}' is produced by two nodes: '{}' ({}) and '{}' ({})",
                    node_label(&graph.node[j], j),
                    graph.node[j].op_type,
                    node_label(n, i),
                    n.op_type
                ));
            }
            producer.insert(o, i);
        }
    }
    for (i, n) in graph.node.iter().enumerate() {
        for inp in node_reads(n) {
            if !nested && !available.contains(inp) && !producer.contains_key(inp) {
                return Err(format!(
                    "node '{}' ({}): input '{inp}' is not produced by any node, initializer or \
                     graph input",
                    node_label(n, i),
                    n.op_type
                ));
            }
        }
    }
    if graph.output.is_empty() {
        return Err("the graph has no outputs".into());
    }
    for o in &graph.output {
        if !nested
            && !available.contains(o.name.as_str())
            && !producer.contains_key(o.name.as_str())
        {
            return Err(format!(
                "graph output '{}' is not produced by any node",
                o.name
            ));
        }
    }
    // Nodes the outputs depend on.
    let mut live = vec![false; graph.node.len()];
    let mut stack: Vec<&str> = graph.output.iter().map(|o| o.name.as_str()).collect();
    let mut seen: HashSet<&str> = HashSet::new();
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        if let Some(&p) = producer.get(v) {
            if !live[p] {
                live[p] = true;
                stack.extend(node_reads(&graph.node[p]));
            }
        }
    }
    // Kahn's algorithm, smallest index first.
    let mut indegree = vec![0usize; graph.node.len()];
    let mut consumers: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, n) in graph.node.iter().enumerate().filter(|(i, _)| live[*i]) {
        for inp in node_reads(n) {
            if producer.contains_key(inp) {
                indegree[i] += 1;
                consumers.entry(inp).or_default().push(i);
            }
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..graph.node.len())
        .filter(|&i| live[i] && indegree[i] == 0)
        .map(Reverse)
        .collect();
    let mut order = Vec::new();
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for o in graph.node[i].output.iter().filter(|o| !o.is_empty()) {
            for &c in consumers
                .get(o.as_str())
                .map(|v| v.as_slice())
                .unwrap_or(&[])
            {
                indegree[c] -= 1;
                if indegree[c] == 0 {
                    ready.push(Reverse(c));
                }
            }
        }
    }
    let live_count = live.iter().filter(|&&l| l).count();
    if order.len() < live_count {
        let stuck = (0..graph.node.len())
            .find(|&i| live[i] && indegree[i] > 0)
            .unwrap_or(0);
        return Err(format!(
            "the graph has a cycle through node '{}' ({})",
            node_label(&graph.node[stuck], stuck),
            graph.node[stuck].op_type
        ));
    }
    Ok(order)
}
