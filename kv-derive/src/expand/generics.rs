//! The names of a type's generic parameters, taken once per derive for the
//! token walkers that look for them (each name was a `to_string`, per field).

use crate::ast::Shell;

pub struct Names {
    /// Type parameters: a tuple in a type naming one gets no impl here, and
    /// a child's type naming one gets a `KvChild` bound.
    pub types: Vec<String>,
    /// Type parameters and `Self`: a child's type naming one is not registered.
    pub types_and_self: Vec<String>,
    /// Type and const parameters and `Self`: an unmarked field's type naming
    /// one is not checked where the struct is defined.
    pub all_and_self: Vec<String>,
    pub lifetimes: Vec<String>,
}

impl Names {
    pub fn of(shell: &Shell<'_>) -> Names {
        let generics = shell.generics;
        let types: Vec<String> = generics
            .type_params()
            .map(|param| param.ident.to_string())
            .collect();
        let mut types_and_self = types.clone();
        types_and_self.push("Self".to_owned());
        let mut all_and_self = types.clone();
        all_and_self.extend(generics.const_params().map(|param| param.ident.to_string()));
        all_and_self.push("Self".to_owned());
        let lifetimes = generics
            .lifetimes()
            .map(|param| param.lifetime.ident.to_string())
            .collect();
        Names {
            types,
            types_and_self,
            all_and_self,
            lifetimes,
        }
    }
}
