//! PURE policy: which of an inventory's files and nodes a request's opt-in sets give a
//! container (the planner, jit-cdi and `cdi generate --mode` alike).

use nvct_model::optin::OptIn;
use nvct_model::{DeviceNode, DriverFile, Inventory};
use std::collections::BTreeSet;

/// What `sets` give a container on the host `inv`, for every path (the planner, jit-cdi, `cdi
/// generate --mode`): each set's nodes, the files of the sets that have nodes, and a note for
/// each set the host has no nodes of.
pub fn opt_in_select<'a>(
    sets: &BTreeSet<OptIn>,
    inv: &'a Inventory,
) -> (Vec<&'a DeviceNode>, Vec<&'a DriverFile>, Vec<String>) {
    let (mut nodes, mut files, mut notes) = (Vec::new(), Vec::new(), Vec::new());
    for o in sets {
        let own: Vec<&DeviceNode> = inv.nodes.iter().filter(|n| o.has_node(&n.path)).collect();
        if own.is_empty() {
            notes.push(format!(
                "{}=enabled: the host has no {} device nodes",
                o.env(),
                o.name()
            ));
            continue;
        }
        nodes.extend(own);
        files.extend(inv.files.iter().filter(|f| o.has_file(f)));
    }
    (nodes, files, notes)
}
